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

use serde::Serialize;
use throttle_proto::Pct;

use crate::analysis::stats::median;
use throttle_proto::workload::Bcast;

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
    use std::collections::BTreeMap;
    let mut tflops: BTreeMap<PmmShape, Vec<f64>> = BTreeMap::new();
    let mut cells: BTreeMap<(PmmShape, u32, PctKey, u64), Vec<&PmmRun>> = BTreeMap::new();
    for r in runs {
        if let Some(c) = r.max_compute_seconds.filter(|c| *c > 0.0) {
            tflops
                .entry(r.shape)
                .or_default()
                .push(r.shape.tflops_from_compute(c));
        }
        cells
            .entry((
                r.shape,
                r.ranks_per_node,
                PctKey(r.pct),
                r.capacity.to_bits(),
            ))
            .or_default()
            .push(r);
    }
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for ((shape, rpn, PctKey(pct), capacity), cell) in &cells {
        let what = || {
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
        };
        let Some(tf) = tflops.get(shape).map(|v| median(v)) else {
            skipped.push(format!(
                "{}: no run reported its kernel time (stored before schema 2?)",
                what()
            ));
            continue;
        };
        let Some(cost) = link(*pct, f64::from_bits(*capacity)) else {
            skipped.push(format!(
                "{}: no Tcomm (unlimited, and no LogGPS measured there)",
                what()
            ));
            continue;
        };
        let params = PmmParams {
            tflops: tf,
            tcomm: cost.tcomm,
            tstartup: cost.tstartup,
        };
        let measured = median(&cell.iter().map(|r| r.seconds).collect::<Vec<_>>());
        let predicted = shape.predict(&params);
        let predicted_tree = shape.predict_with(&params, Factors::Tree);
        let comm_share = (predicted.comm_seconds + predicted.startup_seconds) / predicted.seconds;
        let caveat = if *rpn > 1 {
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
        };
        rows.push(PmmRow {
            shape: *shape,
            procs: shape.procs(),
            bw_pct: *pct,
            runs: cell.len(),
            measured_seconds: measured,
            predicted,
            predicted_tree,
            params,
            tcomm_source: cost.source.clone(),
            error: predicted.seconds / measured - 1.0,
            error_tree: predicted_tree.seconds / measured - 1.0,
            caveat,
        });
    }
    let mut groups: BTreeMap<(Bcast, PctKey), Vec<&PmmRow>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.shape.grid > 1) {
        groups
            .entry((r.shape.bcast, PctKey(r.bw_pct)))
            .or_default()
            .push(r);
    }
    let mut checks = Vec::new();
    for ((bcast, PctKey(pct)), g) in groups {
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
            continue;
        }
        let Some(line) = super::fit_line(&points) else {
            continue;
        };
        let expected = median(
            &g.iter()
                .map(|r| r.params.tcomm / r.params.tflops)
                .collect::<Vec<_>>(),
        );
        checks.push(OverheadCheck {
            bcast,
            bw_pct: pct,
            points,
            intercept: line.intercept,
            slope: line.slope,
            r2: line.r2,
            expected_slope: expected,
            error: line.slope / expected - 1.0,
        });
    }
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

/// A bandwidth setting as a map key (ordered from the highest setting down, unlimited
/// first).
#[derive(Clone, Copy, Debug, PartialEq)]
struct PctKey(Pct);

impl Eq for PctKey {}

impl PartialOrd for PctKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PctKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let v = |p: &Pct| p.percent().unwrap_or(f64::INFINITY);
        v(&other.0).total_cmp(&v(&self.0))
    }
}

fn ceil_log2(q: usize) -> u32 {
    usize::BITS - (q.max(1) - 1).leading_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(size: usize, grid: usize, bcast: Bcast) -> PmmShape {
        PmmShape { size, grid, bcast }
    }

    #[test]
    fn the_factors_reproduce_the_papers_table_3_coefficients() {
        // Table 3 lists Tflops and Tcomm as rates (per second) and the model as
        // a M^2 + b M^3; a = c(q) / q * Tcomm (q steps of (M/q)^2 elements), b = 2 / (N F).
        let rows = [
            // (grid, bcast, elements per second, flops per second, a, b)
            (5, Bcast::Flat, 8.87e6, 8.64e9, 6.764e-8, 9.259e-12), // Dryad Tempest 25x1
            (10, Bcast::Flat, 6.17e6, 6.98e9, 8.913e-8, 2.865e-12), // Dryad Azure 100x1
            (5, Bcast::Binomial, 10.73e6, 8.64e9, 3.727e-8, 9.259e-12), // MS.MPI 1 Gbps
            (5, Bcast::Binomial, 18.17e6, 8.64e9, 2.205e-8, 9.259e-12), // MS.MPI 20 Gbps
        ];
        for (grid, bcast, comm_rate, flop_rate, a, b) in rows {
            let s = shape(1000 * grid, grid, bcast);
            let p = PmmParams {
                tflops: 1.0 / flop_rate,
                tcomm: 1.0 / comm_rate,
                tstartup: 0.0,
            };
            let m = s.size as f64;
            let pred = s.predict(&p);
            let a_model = pred.comm_seconds / (m * m);
            let b_model = pred.compute_seconds / (m * m * m);
            assert!(
                (a_model / a - 1.0).abs() < 0.01,
                "{grid} {bcast}: a {a_model:e} vs {a:e}"
            );
            // Table 3 prints b to 3-4 digits; the Azure row is 2/(100 x 6.98e9) = 2.865e-12.
            assert!(
                (b_model / b - 1.0).abs() < 0.01,
                "{grid} {bcast}: b {b_model:e} vs {b:e}"
            );
        }
    }

    #[test]
    fn overhead_is_linear_in_the_papers_abscissa_with_slope_tcomm_over_tflops() {
        let p = PmmParams {
            tflops: 2e-10,
            tcomm: 8e-8,
            tstartup: 0.0,
        };
        for bcast in [Bcast::Flat, Bcast::Binomial, Bcast::Pipelined] {
            for (size, grid) in [(1200, 2), (1200, 3), (2400, 4), (4800, 8)] {
                let s = shape(size, grid, bcast);
                let t = s.predict(&p).seconds;
                let h = s.parallel_overhead(t, p.tflops);
                let slope = h / s.overhead_abscissa();
                assert!((slope / (p.tcomm / p.tflops) - 1.0).abs() < 1e-9, "{s:?}");
            }
        }
        // The paper's abscissas: q (q + 1) / 4M (flat), q (1 + log2 q) / 4M (binomial).
        let flat = shape(1000, 4, Bcast::Flat).overhead_abscissa();
        assert!((flat - 4.0 * 5.0 / 4000.0).abs() < 1e-15);
        let binomial = shape(1000, 4, Bcast::Binomial).overhead_abscissa();
        assert!((binomial - 4.0 * 3.0 / 4000.0).abs() < 1e-15);
    }

    #[test]
    fn tree_factors_follow_the_broadcast_trees() {
        // Flat: the paper's factor.
        for q in 2..9 {
            let s = shape(100 * q, q, Bcast::Flat);
            assert_eq!(s.tree_transfers_per_step(), s.transfers_per_step());
        }
        // Binomial: q = 2 is the flat tree; q = 3: 0 -> 2, then 0 -> 1; q = 4: 0 -> 2,
        // 0 -> 1 and 2 -> 3.
        assert_eq!(
            shape(200, 2, Bcast::Binomial).tree_transfers_per_step(),
            1.5
        );
        assert_eq!(arrival_times(3, Bcast::Binomial), vec![0.0, 2.0, 1.0]);
        assert_eq!(arrival_times(4, Bcast::Binomial), vec![0.0, 2.0, 1.0, 2.0]);
        assert_eq!(
            arrival_times(8, Bcast::Binomial),
            vec![0.0, 3.0, 2.0, 3.0, 1.0, 3.0, 2.0, 3.0]
        );
        assert_eq!(
            shape(400, 4, Bcast::Binomial).tree_transfers_per_step(),
            2.25
        );
        assert_eq!(
            shape(300, 3, Bcast::Pipelined).tree_transfers_per_step(),
            1.0 + 2.0 / 3.0
        );
    }

    #[test]
    fn one_process_communicates_nothing_and_ceil_log2_counts_rounds() {
        let s = shape(512, 1, Bcast::Flat);
        let p = PmmParams {
            tflops: 1e-9,
            tcomm: 1.0,
            tstartup: 1.0,
        };
        let pred = s.predict(&p);
        assert_eq!(pred.comm_seconds + pred.startup_seconds, 0.0);
        assert!((pred.seconds - 2.0 * 512f64.powi(3) * 1e-9).abs() < 1e-12);
        assert_eq!([1, 2, 3, 4, 5, 8, 9].map(ceil_log2), [0, 1, 2, 2, 3, 3, 4]);
        assert_eq!(s.tflops_from_compute(pred.compute_seconds), 1e-9);
    }

    fn run(size: usize, grid: usize, pct: f64, p: &PmmParams, slow: f64) -> PmmRun {
        let shape = shape(size, grid, Bcast::Binomial);
        let pred = shape.predict(p);
        PmmRun {
            shape,
            ranks_per_node: 1,
            pct: Pct::new(pct).unwrap(),
            capacity: 1.25e8,
            seconds: pred.seconds * slow,
            max_compute_seconds: Some(pred.compute_seconds),
        }
    }

    #[test]
    fn runs_that_follow_the_model_compare_exactly_and_a_slow_link_shows() {
        let nominal = |tcomm: f64| LinkCost {
            tcomm,
            tstartup: 0.0,
            source: "nominal".into(),
        };
        let at = |pct: f64| PmmParams {
            tflops: 2e-10,
            tcomm: 8.0 / (pct / 100.0 * 1.25e8),
            tstartup: 0.0,
        };
        let mut runs = Vec::new();
        for pct in [100.0, 20.0] {
            for (size, grid) in [(1024, 1), (1024, 2), (1536, 3), (2048, 4)] {
                runs.push(run(size, grid, pct, &at(pct), 1.0));
            }
        }
        let link = |p: Pct, c: f64| Some(nominal(8.0 / (p.percent()? / 100.0 * c)));
        let c = compare(&runs, link);
        assert_eq!(c.rows.len(), 8);
        assert!(c.max_abs_error_where_assumptions_hold.unwrap() < 1e-9);
        assert!(c
            .rows
            .iter()
            .filter(|r| r.shape.grid == 1)
            .all(|r| r.caveat.is_some()));
        assert_eq!(c.checks.len(), 2);
        for k in &c.checks {
            assert!(k.error.abs() < 1e-9 && k.r2 > 0.999, "{k:?}");
        }
        // The same runs, but the link at 20% is 30% slower than the model thinks.
        let mut slow = Vec::new();
        for (size, grid) in [(1024, 2), (1536, 3), (2048, 4)] {
            let mut p = at(20.0);
            p.tcomm *= 1.3;
            slow.push(run(size, grid, 20.0, &p, 1.0));
        }
        let c = compare(&slow, link);
        assert!(c.max_abs_error_where_assumptions_hold.unwrap() > 0.05);
        assert!(
            (c.checks[0].error + 1.0 - 1.3).abs() < 1e-6,
            "{:?}",
            c.checks[0]
        );
    }
}
