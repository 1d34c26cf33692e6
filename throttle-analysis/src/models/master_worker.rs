//! The master/worker closed forms of the master/worker thesis (the MATE/POETRIES thesis, expressions 7-9
//! and 13-17) and the saturation point of Mizutani et al., for `model mw`.
//!
//! One iteration with n workers: the master sends each worker alpha V / n bytes, each
//! computes Tc / n, and returns (1 - alpha) V / n bytes. With mo the per-message start-up
//! time and lambda the cost per byte (the inverse bandwidth), the iteration time is
//!
//! ```text
//! (7) asynchronous, mo >= lambda alpha V / n:  Tt = (n + 1) mo + (lambda V + Tc) / n + mu_m
//! (8) asynchronous, mo <  lambda alpha V / n:  Tt = 2 mo + ((1 + (n - 1) alpha) lambda V + Tc) / n + mu_m
//! (9) synchronous:                             Tt = (n + 1) mo + ((1 + (n - 1) alpha) lambda V + Tc) / n + mu_m
//! ```
//!
//! (the sends overlap each other's start-up in (7); in (8) the master's link is the
//! bottleneck: all of alpha V passes it one after the other). The number of workers that
//! minimises Tt (dTt/dn = 0), with V fixed or growing with the workers (V' = n' V / n):
//!
//! ```text
//! (13) asynchronous, V fixed:   n = sqrt((lambda V + Tc) / mo)
//! (14) synchronous,  V fixed:   n = sqrt(((1 - alpha) lambda V + Tc) / mo)
//! (15) asynchronous, V grows:   n = sqrt(Tc / mo)
//! (16) synchronous,  V grows:   n = sqrt(Tc / (mo + alpha lambda V / n))
//! ```
//!
//! The thesis reports the root rounded down. In regime (8) Tt falls with every worker
//! added, and the thesis tunes by its performance index instead (expression 17):
//! efficiency E(n) = Tc / (n Tt(n)), index Pi(n) = Tt(n) / E(n) = n Tt(n)^2 / Tc, lowest
//! where the time bought by one more worker no longer pays for it.
//!
//! Mizutani et al. add that the master's per-message overhead grows with the processes it
//! serves, o = o'_a + o'_b P: with mo(n) = a + b (n + 1) in the expressions above the
//! iteration time has a minimum even in regime (8), the **saturation point**.
//!
//! The displayed equations are missing from the thesis's text extraction; these are
//! rebuilt from its surviving terms, its two quartics for the index, and its worked
//! example (figure 23), which the unit test reproduces to the digits printed.
//!
//! `compare` puts stored runs against these for `model mw`: per program setting and
//! bandwidth, lambda = G and mo = L + o_s + o_r from the LogGPS measurements there (else
//! the nominal lambda and mo = 0), the median time per worker count against Tt(n), and the
//! saturation point with the master's overhead fitted over the process counts.

use std::collections::BTreeMap;

use serde::Serialize;
use throttle_proto::workload::{MwOptions, Options};
use throttle_proto::Pct;

use super::loggps::LinkMeasurement;
use super::loggps::{self, LinkFit};
use crate::method::stats::median;

/// The model's inputs, in one unit of time throughout (seconds here; the thesis uses ms).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MwModel {
    /// mo: start-up time of one message.
    pub mo: f64,
    /// lambda: time per byte (the inverse bandwidth).
    pub lambda: f64,
    /// V: bytes per iteration (tasks and results).
    pub volume: f64,
    /// alpha: the master's share of V.
    pub alpha: f64,
    /// Tc: computation per iteration, all workers together.
    pub tc: f64,
    /// mu_m: the master's own work per iteration.
    pub mu_m: f64,
}

/// How the master sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sending {
    Asynchronous,
    Synchronous,
}

/// Which of the thesis's expressions applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Expression {
    /// (7): asynchronous, start-up dominates a task's transfer.
    E7,
    /// (8): asynchronous, the transfers dominate (the master's link is the bottleneck).
    E8,
    /// (9): synchronous sends.
    E9,
}

impl std::fmt::Display for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Expression::E7 => "(7)",
            Expression::E8 => "(8)",
            Expression::E9 => "(9)",
        })
    }
}

/// How the volume behaves when workers are added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VolumeScaling {
    /// V stays as measured.
    Fixed,
    /// V grows with the workers (V' = n' V / n).
    Linear,
}

impl MwModel {
    pub fn expression(&self, n: usize, sending: Sending) -> Expression {
        match sending {
            Sending::Synchronous => Expression::E9,
            Sending::Asynchronous => {
                if self.mo >= self.lambda * self.alpha * self.volume / n.max(1) as f64 {
                    Expression::E7
                } else {
                    Expression::E8
                }
            }
        }
    }

    /// Tt(n), expressions (7)-(9).
    pub fn iteration_time(&self, n: usize, sending: Sending) -> f64 {
        let nf = n.max(1) as f64;
        let lv = self.lambda * self.volume;
        let spread = (1.0 + (nf - 1.0) * self.alpha) * lv;
        self.mu_m
            + match self.expression(n, sending) {
                Expression::E7 => (nf + 1.0) * self.mo + (lv + self.tc) / nf,
                Expression::E8 => 2.0 * self.mo + (spread + self.tc) / nf,
                Expression::E9 => (nf + 1.0) * self.mo + (spread + self.tc) / nf,
            }
    }

    /// The root of dTt/dn = 0, expressions (13)-(16) (not rounded; `n_now` is the worker
    /// count V was measured at, used by (16)).
    pub fn optimal_workers(&self, sending: Sending, scaling: VolumeScaling, n_now: usize) -> f64 {
        let lv = self.lambda * self.volume;
        match (sending, scaling) {
            (Sending::Asynchronous, VolumeScaling::Fixed) => ((lv + self.tc) / self.mo).sqrt(),
            (Sending::Synchronous, VolumeScaling::Fixed) => {
                (((1.0 - self.alpha) * lv + self.tc) / self.mo).sqrt()
            }
            (Sending::Asynchronous, VolumeScaling::Linear) => (self.tc / self.mo).sqrt(),
            (Sending::Synchronous, VolumeScaling::Linear) => {
                (self.tc / (self.mo + self.alpha * lv / n_now.max(1) as f64)).sqrt()
            }
        }
    }

    /// E(n) = Tc / (n Tt(n)).
    pub fn efficiency(&self, n: usize, sending: Sending) -> f64 {
        self.tc / (n.max(1) as f64 * self.iteration_time(n, sending))
    }

    /// Pi(n) = n Tt(n)^2 / Tc (expression 17).
    pub fn performance_index(&self, n: usize, sending: Sending) -> f64 {
        let t = self.iteration_time(n, sending);
        n.max(1) as f64 * t * t / self.tc
    }

    /// The worker count in 1..=max with the lowest Tt, and the one with the lowest Pi.
    pub fn best_in(&self, max: usize, sending: Sending) -> (usize, usize) {
        let argmin = |f: &dyn Fn(usize) -> f64| {
            (1..=max.max(1))
                .min_by(|a, b| f(*a).total_cmp(&f(*b)))
                .unwrap_or(1)
        };
        (
            argmin(&|n| self.iteration_time(n, sending)),
            argmin(&|n| self.performance_index(n, sending)),
        )
    }

    /// The model with the master's overhead of Mizutani et al. at n workers: mo = a + b (n + 1).
    pub fn with_linear_overhead(&self, a: f64, b: f64, n: usize) -> MwModel {
        MwModel {
            mo: a + b * (n as f64 + 1.0),
            ..*self
        }
    }

    /// The saturation point of Mizutani et al.: the worker count in 1..=max with the lowest Tt
    /// when mo grows linearly with the processes, and whether it lies inside the range
    /// (at `max` it may lie beyond).
    pub fn saturation(&self, a: f64, b: f64, max: usize, sending: Sending) -> (usize, bool) {
        let t = |n: usize| {
            self.with_linear_overhead(a, b, n)
                .iteration_time(n, sending)
        };
        let best = (1..=max.max(1))
            .min_by(|x, y| t(*x).total_cmp(&t(*y)))
            .unwrap_or(1);
        (best, best < max)
    }
}

/// One worker count at one bandwidth: the median measured iteration time against Tt(n).
#[derive(Debug, Serialize)]
pub struct MwPoint {
    pub workers: usize,
    pub runs: usize,
    pub measured_seconds: f64,
    pub predicted_seconds: f64,
    pub error: f64,
    pub expression: Expression,
    pub measured_index: f64,
    pub predicted_index: f64,
}

/// One bandwidth of one program setting.
#[derive(Debug, Serialize)]
pub struct MwSetting {
    pub options: MwOptions,
    pub bw_pct: Pct,
    pub model: MwModel,
    /// Where mo and lambda came from.
    pub source: String,
    pub points: Vec<MwPoint>,
    /// Worker counts with the lowest time and the lowest index Pi: measured, and
    /// predicted over the same worker counts.
    pub measured_best_time: usize,
    pub measured_best_index: usize,
    pub predicted_best_time: usize,
    pub predicted_best_index: usize,
    /// The root of (13)/(14) (V fixed).
    pub optimal_workers_root: f64,
    /// Mizutani et al.: with mo growing linearly in P (the LogGPS fit), the worker count with
    /// the lowest time up to 4x the largest measured, and whether it lies below that.
    pub saturation: Option<(usize, bool)>,
    pub mean_abs_error: f64,
}

/// Stored master/worker runs against the model.
pub struct MwComparison {
    /// Per program setting and bandwidth, in that order.
    pub settings: Vec<MwSetting>,
    /// The groups of runs that could not be compared, and why.
    pub skipped: Vec<String>,
}

/// One stored run of the master/worker program, as the comparison needs it.
#[derive(Clone, Debug)]
pub struct MwRun {
    /// The program's options as stored (JSON): runs are compared per setting.
    pub options: String,
    pub pct: Pct,
    /// The link's capacity at 100%, payload bytes per second.
    pub capacity: f64,
    /// Processes: the master and its workers.
    pub procs: u32,
    /// The iteration's time (the kernel's, else the whole run's), seconds.
    pub seconds: Option<f64>,
}

/// Compare the stored runs with the model, per program setting and bandwidth: mo and
/// lambda from the LogGPS measurements `links` at that bandwidth (else the nominal link
/// and mo = 0), the saturation point from their fit over the process counts.
pub fn compare(rows: &[MwRun], links: &[LinkMeasurement], sending: Sending) -> MwComparison {
    let fit = loggps::fit(links);
    let mut groups: BTreeMap<(String, Pct), Vec<&MwRun>> = BTreeMap::new();
    for r in rows {
        groups
            .entry((r.options.clone(), r.pct))
            .or_default()
            .push(r);
    }
    let mut settings = Vec::new();
    let mut skipped = Vec::new();
    for ((options, _), runs) in groups {
        match compare_setting(&options, &runs, links, &fit, sending) {
            Ok(s) => settings.push(s),
            Err(why) => skipped.push(why),
        }
    }
    MwComparison { settings, skipped }
}

/// One program setting (`options`, as stored) at one bandwidth; Err: why its runs cannot
/// be compared.
fn compare_setting(
    options: &str,
    runs: &[&MwRun],
    links: &[LinkMeasurement],
    fit: &LinkFit,
    sending: Sending,
) -> Result<MwSetting, String> {
    let pct = runs[0].pct;
    let Ok(Options::Mw(opts)) = Options::from_json("mw", options) else {
        return Err(format!(
            "{} run(s) at {}: their options are not a master/worker program's ({options})",
            runs.len(),
            pct
        ));
    };
    if opts.compute_seconds <= 0.0 || !opts.compute_seconds.is_finite() {
        return Err(format!(
            "{} run(s) at {}: compute_seconds = 0 (the model's index divides by Tc)",
            runs.len(),
            pct
        ));
    }
    let (lambda, mo, source) = link_parameters(links, pct, runs[0].capacity, runs.len())?;
    let model = MwModel {
        mo,
        lambda,
        volume: opts.volume as f64,
        alpha: opts.alpha,
        tc: opts.compute_seconds,
        mu_m: 0.0,
    };
    let by_n = times_by_workers(runs);
    if by_n.is_empty() {
        return Err(format!(
            "{} run(s) at {}: none with a worker (2 processes or more)",
            runs.len(),
            pct
        ));
    }
    let points = predict_points(&model, &by_n, sending);
    let max_n = points.iter().map(|p| p.workers).max().unwrap_or(1);
    Ok(MwSetting {
        options: opts,
        bw_pct: pct,
        model,
        source,
        measured_best_time: best_workers(&points, |p| p.measured_seconds),
        measured_best_index: best_workers(&points, |p| p.measured_index),
        predicted_best_time: best_workers(&points, |p| p.predicted_seconds),
        predicted_best_index: best_workers(&points, |p| p.predicted_index),
        optimal_workers_root: model.optimal_workers(sending, VolumeScaling::Fixed, max_n),
        saturation: saturation_point(&model, fit, max_n, sending),
        mean_abs_error: points.iter().map(|p| p.error.abs()).sum::<f64>() / points.len() as f64,
        points,
    })
}

/// lambda, mo and where they came from, at `pct` of a link of `capacity`: medians of the
/// LogGPS measurements there (G; L + o_s + o_r), else the nominal lambda and mo = 0. Err
/// (for the `runs` runs there) at unlimited bandwidth without a measurement.
fn link_parameters(
    links: &[LinkMeasurement],
    pct: Pct,
    capacity: f64,
    runs: usize,
) -> Result<(f64, f64, String), String> {
    let at = loggps::measured_at(links, pct, capacity);
    if at.is_empty() {
        let Some(p) = pct.percent() else {
            return Err(format!(
                "{runs} run(s) at unlimited bandwidth: no LogGPS measured there, so no lambda"
            ));
        };
        Ok((
            1.0 / (p / 100.0 * capacity),
            0.0,
            "nominal lambda, mo = 0 (no LogGPS measurement at this bandwidth: run `model loggps`)"
                .to_string(),
        ))
    } else {
        Ok((
            median(&at.iter().map(|l| l.gap_per_byte).collect::<Vec<_>>()),
            median(
                &at.iter()
                    .map(|l| l.latency + l.send_overhead + l.recv_overhead)
                    .collect::<Vec<_>>(),
            ),
            format!("LogGPS at {} ({} measurements)", pct, at.len()),
        ))
    }
}

/// The runs' iteration times (the kernel's, else the whole run's) by worker count
/// (processes - 1; runs without a worker left out).
fn times_by_workers(runs: &[&MwRun]) -> BTreeMap<usize, Vec<f64>> {
    let mut by_n: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for r in runs {
        if r.procs < 2 {
            continue;
        }
        if let Some(t) = r.seconds {
            by_n.entry(r.procs as usize - 1).or_default().push(t);
        }
    }
    by_n
}

/// Per worker count: the median measured time and index against the model's.
fn predict_points(
    model: &MwModel,
    by_n: &BTreeMap<usize, Vec<f64>>,
    sending: Sending,
) -> Vec<MwPoint> {
    by_n.iter()
        .map(|(&n, ts)| {
            let m = median(ts);
            let p = model.iteration_time(n, sending);
            MwPoint {
                workers: n,
                runs: ts.len(),
                measured_seconds: m,
                predicted_seconds: p,
                error: p / m - 1.0,
                expression: model.expression(n, sending),
                measured_index: n as f64 * m * m / model.tc,
                predicted_index: model.performance_index(n, sending),
            }
        })
        .collect()
}

/// The worker count of the point with the lowest `f` (1 without points).
fn best_workers(points: &[MwPoint], f: impl Fn(&MwPoint) -> f64) -> usize {
    points
        .iter()
        .min_by(|a, b| f(a).total_cmp(&f(b)))
        .map(|p| p.workers)
        .unwrap_or(1)
}

/// Mizutani et al.'s saturation point up to 4x `max_n` workers, when the LogGPS fit has
/// both of the master's overhead slopes.
fn saturation_point(
    model: &MwModel,
    fit: &LinkFit,
    max_n: usize,
    sending: Sending,
) -> Option<(usize, bool)> {
    match (&fit.send, &fit.recv) {
        // mo(P) = mo + b (P - 2): the ping-pong's start-up, growing with the
        // master's fitted send and receive slopes.
        (Some(s), Some(r)) => {
            let b = s.b + r.b;
            Some(model.saturation(model.mo - 2.0 * b, b, max_n * 4, sending))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thesis's figure 23: V = 4 KB, Tc = 1.6 s, mo = 1 ms, 1 us/byte, expression (7)
    /// (in ms, as the thesis writes it; alpha does not enter (7)).
    fn figure_23() -> MwModel {
        MwModel {
            mo: 1.0,
            lambda: 0.001,
            volume: 4096.0,
            alpha: 0.9,
            tc: 1600.0,
            mu_m: 0.0,
        }
    }

    #[test]
    fn figure_23_expected_times_for_15_20_23_30_40_workers() {
        let m = figure_23();
        let printed = [
            (15, 122.939733),
            (20, 101.2048),
            (23, 93.7433),
            (30, 84.469867),
            (40, 81.1024),
        ];
        for (n, t) in printed {
            assert_eq!(m.expression(n, Sending::Asynchronous), Expression::E7);
            let got = m.iteration_time(n, Sending::Asynchronous);
            assert!((got - t).abs() < 1e-4, "{n} workers: {got} vs {t}");
        }
        // "going from 15 to 20 workers means a gain of 17.68% ... from 30 to 40 ... 3.99%"
        let t = |n| m.iteration_time(n, Sending::Asynchronous);
        assert!(((1.0 - t(20) / t(15)) * 100.0 - 17.68).abs() < 0.005);
        assert!(((1.0 - t(40) / t(30)) * 100.0 - 3.99).abs() < 0.005);
        // The optimum is 40 workers, by (13) and (15).
        let n13 = m.optimal_workers(Sending::Asynchronous, VolumeScaling::Fixed, 40);
        let n15 = m.optimal_workers(Sending::Asynchronous, VolumeScaling::Linear, 40);
        assert_eq!((n13.floor(), n15.floor()), (40.0, 40.0));
        assert_eq!(m.best_in(60, Sending::Asynchronous).0, 40);
        // 23 workers have the lowest performance index.
        assert_eq!(m.best_in(60, Sending::Asynchronous).1, 23);
    }

    #[test]
    fn figure_21_optima_of_the_other_expressions() {
        // V = 1 KB or 1 MB, Tc = 2 s, mo = 1 ms, 1 us/byte, alpha 0.9.
        let m = |v: f64| MwModel {
            volume: v,
            tc: 2000.0,
            ..figure_23()
        };
        let f = |x: f64| x.floor() as i64;
        let sync = Sending::Synchronous;
        assert_eq!(
            f(m(1024.0).optimal_workers(Sending::Asynchronous, VolumeScaling::Fixed, 1)),
            44
        );
        assert_eq!(
            f(m(1024.0).optimal_workers(sync, VolumeScaling::Fixed, 1)),
            44
        );
        assert_eq!(
            f(m(1_048_576.0).optimal_workers(sync, VolumeScaling::Fixed, 1)),
            45
        );
        assert_eq!(
            f(m(1024.0).optimal_workers(Sending::Asynchronous, VolumeScaling::Linear, 1)),
            44
        );
        // (16) with the volume per worker at 1 KB and at 1 MB ("run sequentially").
        assert_eq!(
            f(m(1024.0).optimal_workers(sync, VolumeScaling::Linear, 1)),
            32
        );
        assert_eq!(
            f(m(1_048_576.0).optimal_workers(sync, VolumeScaling::Linear, 1)),
            1
        );
    }

    #[test]
    fn a_slower_link_moves_the_optimum_and_linear_overhead_saturates() {
        // Bandwidth-bound (8): the index's best worker count falls as lambda grows.
        let base = MwModel {
            mo: 1e-4,
            lambda: 8e-9, // 125 MB/s
            volume: 16e6,
            alpha: 0.5,
            tc: 2.0,
            mu_m: 0.0,
        };
        let slow = MwModel {
            lambda: base.lambda * 10.0,
            ..base
        };
        assert_eq!(base.expression(4, Sending::Asynchronous), Expression::E8);
        let (_, pi_fast) = base.best_in(64, Sending::Asynchronous);
        let (_, pi_slow) = slow.best_in(64, Sending::Asynchronous);
        assert!(pi_slow < pi_fast, "{pi_slow} vs {pi_fast}");
        assert!(
            slow.iteration_time(4, Sending::Asynchronous)
                > base.iteration_time(4, Sending::Asynchronous)
        );
        // In (8) Tt keeps falling; an overhead growing with P gives it a minimum.
        assert_eq!(base.best_in(64, Sending::Asynchronous).0, 64);
        let (sat, inside) = base.saturation(1e-4, 2e-3, 64, Sending::Asynchronous);
        assert!(inside && sat > 1 && sat < 64, "{sat}");
        let (none, inside) = base.saturation(1e-4, 0.0, 64, Sending::Asynchronous);
        assert!(!inside && none == 64);
    }
}
