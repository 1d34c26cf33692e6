//! Sizes whose runs kept the machine's cores busy: CPU-bound measurements.
//!
//! On a machine that runs every node (a loopback cluster), a size whose ranks and agents
//! use nearly all of the cores measures the cores as much as the link: a bandwidth step
//! then moves the time less (or more) than the network would, and a CTI read there says
//! little about the link. A sweep records each run's own processes' share of the cores
//! (`cpu_own`); a size whose runs' median reaches [`CPU_BOUND`] is marked wherever its
//! figures are shown, and a projection fitted on such a size is not trusted
//! ([`with_cpu`]): its backtest compares CPU-bound times with CPU-bound times.

use serde::Serialize;

use crate::trust::backtest::Verdict;
use crate::Observation;

/// Runs of a size whose own processes used at least this share of all cores over the
/// run, by their median, are CPU-bound. Measured here (experiments/2026-11-27-warnings.md):
/// sleeping or waiting programs 0.01-0.05, PMM 0.38-0.43, programs that burn every core
/// 0.78-0.98 (a run's wall time includes its set-up, so a program busy for all of its own
/// time shows 0.8-0.9).
pub const CPU_BOUND: f64 = 0.75;

/// The share a size's runs are judged by: the median of their shares (the mean of the
/// middle two for an even count). The sweep's warning and the analysis use this one rule.
pub fn median_share(shares: &[f64]) -> Option<f64> {
    (!shares.is_empty()).then(|| crate::method::stats::median(shares))
}

/// Whether runs with these shares make their size CPU-bound.
pub fn is_bound(shares: &[f64]) -> bool {
    median_share(shares).is_some_and(|m| m >= CPU_BOUND)
}

/// One CPU-bound size.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuBound {
    pub procs: u32,
    /// The median share of the machine's cores its runs' own processes used, 0..1.
    pub share: f64,
    /// How many of its runs recorded their share.
    pub runs: usize,
}

/// The CPU-bound sizes among `good` runs, smallest first: those whose runs' median share
/// of the cores (over the runs that recorded one) reaches [`CPU_BOUND`].
pub fn sizes(good: &[&Observation]) -> Vec<CpuBound> {
    // Shares outside 0..1 never get here: `Observation::problems` refuses the row.
    let mut by: std::collections::BTreeMap<u32, Vec<f64>> = Default::default();
    for o in good {
        if let Some(s) = o.cpu_own {
            by.entry(o.procs).or_default().push(s);
        }
    }
    by.into_iter()
        .filter_map(|(procs, shares)| {
            let share = median_share(&shares)?;
            (share >= CPU_BOUND).then_some(CpuBound {
                procs,
                share,
                runs: shares.len(),
            })
        })
        .collect()
}

/// The share of `procs`, when it is CPU-bound.
pub fn share_at(bound: &[CpuBound], procs: u32) -> Option<f64> {
    bound.iter().find(|b| b.procs == procs).map(|b| b.share)
}

/// `verdict`, downgraded to [`Verdict::CpuBound`] (which keeps it as `inner`) when it
/// would trust (or give) a projection fitted on a CPU-bound size (`fitted`: the sizes its
/// projection is fitted on). A failed or untested verdict stays as it is: it is no basis
/// either way.
pub fn with_cpu(verdict: Verdict, bound: &[CpuBound], fitted: &[u32]) -> Verdict {
    let worst_pp = match verdict {
        Verdict::Passed { worst_pp, .. }
        | Verdict::Thin { worst_pp, .. }
        | Verdict::Unmodelled { worst_pp, .. } => worst_pp,
        Verdict::Unchecked { .. } => 0.0,
        _ => return verdict,
    };
    let hit: Vec<&CpuBound> = bound.iter().filter(|b| fitted.contains(&b.procs)).collect();
    if hit.is_empty() {
        return verdict;
    }
    Verdict::CpuBound {
        procs: hit.iter().map(|b| b.procs).collect(),
        share: hit.iter().map(|b| b.share).fold(0.0, f64::max),
        worst_pp,
        inner: Box::new(verdict),
    }
}

/// The sizes in words: `4, 8 procs (91%, 97% of the cores)`.
pub fn words(bound: &[CpuBound]) -> String {
    let procs: Vec<String> = bound.iter().map(|b| b.procs.to_string()).collect();
    let shares: Vec<String> = bound
        .iter()
        .map(|b| format!("{:.0}%", b.share * 100.0))
        .collect();
    format!(
        "{} procs ({} of the cores)",
        procs.join(", "),
        shares.join(", ")
    )
}

/// The warning for CPU-bound sizes, none without them.
pub fn warning(bound: &[CpuBound]) -> Option<String> {
    (!bound.is_empty()).then(|| {
        format!(
            "CPU-bound: the runs at {} used this machine's cores (their own processes' CPU time, the median share of all cores over a run, at least {:.0}%): a CTI measured there says as much about the cores as about the link, and a projection fitted there is not trusted (use fewer nodes or ranks per node here, or a machine with more cores)",
            words(bound),
            CPU_BOUND * 100.0
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::cells::pct;

    fn run(procs: u32, own: Option<f64>) -> Observation {
        Observation {
            cpu_own: own,
            ..Observation::for_test("s", procs, pct(100.0), 0, 1.0)
        }
    }

    #[test]
    fn a_size_is_cpu_bound_by_the_median_of_its_runs() {
        let runs = [
            run(2, Some(0.2)),
            run(2, Some(0.9)),
            run(2, Some(0.3)),
            run(4, Some(0.8)),
            run(4, Some(0.95)),
            run(4, Some(0.1)),
            run(8, None),
        ];
        let good: Vec<&Observation> = runs.iter().collect();
        let b = sizes(&good);
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!((b[0].procs, b[0].share, b[0].runs), (4, 0.8, 3));
        assert_eq!(share_at(&b, 4), Some(0.8));
        assert_eq!(share_at(&b, 2), None);
        assert_eq!(words(&b), "4 procs (80% of the cores)");
        // Two runs: the mean of both, as the sweep's warning judges them.
        assert_eq!(median_share(&[0.6, 0.8]), Some(0.7));
        assert!(!is_bound(&[0.6, 0.8]) && is_bound(&[0.7, 0.8]) && !is_bound(&[]));
    }

    #[test]
    fn a_passed_backtest_on_cpu_bound_sizes_is_not_trusted() {
        let passed = Verdict::Passed {
            checks: 4,
            sizes: 2,
            misses: 0,
            rms_pp: 1.0,
            worst_pp: -2.0,
        };
        let bound = [CpuBound {
            procs: 4,
            share: 0.9,
            runs: 3,
        }];
        let v = with_cpu(passed.clone(), &bound, &[2, 4, 6]);
        assert!(!v.trusted() && v.is_basis(), "{v:?}");
        assert!(v.text().contains("CPU-bound") && v.text().contains("4 procs"));
        assert!(matches!(&v, Verdict::CpuBound { inner, .. } if **inner == passed));
        // Not fitted there (a held-out size): the verdict stands.
        assert_eq!(with_cpu(passed.clone(), &bound, &[2, 6]), passed);
        // No basis stays no basis.
        let untested = Verdict::Untested { why: "x".into() };
        assert_eq!(with_cpu(untested.clone(), &bound, &[4]), untested);
    }
}
