//! Precision on request (`[until]` in a spec): after the sweep's points and its demand search, keep measuring
//! until the answer at the size asked is narrow enough, or the budget is spent.
//!
//! Each round analyses what is stored (as `analyze --predict` would, the held-out sizes
//! held out) and asks the answer what would narrow it most ([`throttle_analysis::answer::narrow`]):
//! a size between the largest measured one and the size asked (only the node counts the
//! spec allows, `sizes`: the ones the user can afford), or one more repeat of each
//! baseline and of the steps around each demand. The step with the most narrowing per run that
//! fits in what is left of the budget is taken; the round ends when the widest interval
//! at the size asked is at most `width`, when nothing affordable would narrow it, or when
//! the budget is spent, and the sweep says which.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use throttle_analysis::answer::Step;
use throttle_analysis::Analysis;

/// The `[until]` table of a sweep spec: measure until the answer at `procs` is at most
/// `width` wide.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Until {
    /// The size (processes) the answer is for: the projection's target.
    pub procs: u32,
    /// Done when every level's interval at `procs` is at most this wide (points of
    /// bandwidth).
    #[serde(default = "default_width")]
    pub width: f64,
    /// The most runs it may add.
    #[serde(default = "default_budget")]
    pub budget: usize,
    /// Node counts it may add, when a larger measured size would narrow the answer most.
    #[serde(default)]
    pub sizes: Vec<usize>,
    /// Sizes (processes) measured but held out of the fits, to compare the projection
    /// with (as `analyze --predict`).
    #[serde(default)]
    pub held_out: Vec<u32>,
    /// CTI levels (percent) [default: the `[search]` levels, or 10, 15, 20, 25].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<Vec<f64>>,
}

fn default_width() -> f64 {
    25.0
}

fn default_budget() -> usize {
    100
}

impl Until {
    /// Refuse what cannot be measured to, naming the key.
    pub fn check(&self, nodes: &[usize]) -> Result<()> {
        if !(1..=10_000_000).contains(&self.procs) {
            bail!("[until] `procs` must be a number of processes from 1 up");
        }
        if !(self.width.is_finite() && (0.5..=100.0).contains(&self.width)) {
            bail!("[until] `width` must be from 0.5 to 100 points of bandwidth");
        }
        if !(1..=100_000).contains(&self.budget) {
            bail!("[until] `budget` must be from 1 to 100000 runs");
        }
        if let Some(n) = self.sizes.iter().find(|n| **n == 0 || nodes.contains(n)) {
            bail!("[until] `sizes`: {n} is no node count to add (0, or already in `nodes`)");
        }
        if let Some(l) = &self.levels {
            if l.is_empty()
                || l.len() > 20
                || l.iter()
                    .any(|c| !(c.is_finite() && *c > 0.0 && *c <= 1000.0))
            {
                bail!("[until] `levels` must list 1 to 20 CTI levels (percent, above 0)");
            }
        }
        Ok(())
    }
}

/// The least narrowing (points of bandwidth) a round of repeats must promise.
const MIN_GAIN: f64 = 0.5;

/// What the next round does.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// The widest interval at the size asked is within `width`.
    Reached { width: f64 },
    /// Measure this node count (the spec's steps, then the search).
    Size { nodes: usize },
    /// One more repeat of these (node count, bandwidth percent) points.
    Repeats { points: Vec<(usize, f64)> },
    /// Nothing affordable would narrow it (the reason).
    Stuck { width: Option<f64>, why: String },
}

/// The next round, from the `analysis` of what is stored: `measured` the node counts
/// measured so far, `rpn` ranks per node, `left` the runs left in the budget.
pub fn next(p: &Until, analysis: &Analysis, measured: &[usize], rpn: usize, left: usize) -> Next {
    let Some(advice) = analysis
        .bottom_line
        .advice
        .as_ref()
        .filter(|a| a.procs == p.procs)
    else {
        return Next::Stuck {
            width: None,
            why: format!(
                "the analysis gives no interval at {} procs ({})",
                p.procs,
                analysis
                    .bottom_line
                    .lines
                    .first()
                    .cloned()
                    .unwrap_or_default()
            ),
        };
    };
    if advice.width <= p.width {
        return Next::Reached {
            width: advice.width,
        };
    }
    for option in &advice.options {
        match &option.step {
            Step::Size { procs } => {
                // The allowed node count nearest the one advised, not yet measured.
                let want = (*procs as usize).div_ceil(rpn.max(1));
                let pick = p
                    .sizes
                    .iter()
                    .copied()
                    .filter(|n| !measured.contains(n) && n * rpn < p.procs as usize)
                    .min_by_key(|n| n.abs_diff(want));
                if let Some(nodes) = pick {
                    if option.runs <= left {
                        return Next::Size { nodes };
                    }
                }
            }
            Step::Repeats { points } => {
                // Not for less than half a point: where the model's error makes the width,
                // repeats only spend the budget.
                if points.len() <= left && option.width_after <= advice.width - MIN_GAIN {
                    return Next::Repeats {
                        points: points
                            .iter()
                            .map(|&(procs, bw)| (procs as usize / rpn.max(1), bw))
                            .collect(),
                    };
                }
            }
        }
    }
    Next::Stuck {
        width: Some(advice.width),
        why: format!(
            "{}; none of it fits in the {left} runs left, narrows it by {MIN_GAIN} points or more, or is a size the spec allows (`[until] sizes`)",
            advice.text()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttle_analysis::{analyze, Observation, Question};

    /// A program whose weight k drifts with the size (so the projection has a model error
    /// to narrow), measured on `sizes` with 3 repeats 0.5% apart.
    fn study(sizes: &[u32]) -> Vec<Observation> {
        let mut obs = Vec::new();
        for &p in sizes {
            let v = 1e6 * (p as f64).sqrt();
            let t100 = 1.0 + 8.0 / p as f64;
            let k = 0.4 + 0.05 * (p as f64).log2();
            for bw in [5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 60.0, 100.0] {
                for r in 0..3 {
                    obs.push(Observation {
                        series: "x".into(),
                        procs: p,
                        bw_pct: throttle_proto::Pct::new(bw).unwrap(),
                        repeat: r,
                        seconds: (t100 + k * v / 12.5e6 * (100.0 / bw - 1.0))
                            * (1.0 + (r as f64 - 1.0) * 5e-3),
                        ok: true,
                        nodes: p,
                        busy: None,
                        cpu_own: None,
                        bytes_sent: Some((v * p as f64) as u64),
                        busiest_bytes: None,
                        flag: None,
                        problem: None,
                        latency_step: None,
                    });
                }
            }
        }
        obs
    }

    fn until(width: f64, sizes: Vec<usize>) -> Until {
        Until {
            procs: 64,
            width,
            budget: 500,
            sizes,
            held_out: vec![],
            levels: None,
        }
    }

    #[test]
    fn it_stops_when_narrow_and_otherwise_takes_an_affordable_step() {
        let measured = [2, 3, 4, 6];
        let a = analyze(
            &study(&[2, 3, 4, 6]),
            &Question {
                cti: vec![10.0, 20.0],
                predict: vec![64],
                series: None,
                time_source: "test".into(),
                capacity: Some(12.5e6),
                keep_flagged: false,
                keep_without_traffic: false,
                interp: Default::default(),
                unit: Default::default(),
            },
        )
        .unwrap();
        let advice = a
            .bottom_line
            .advice
            .clone()
            .unwrap_or_else(|| panic!("no advice: {:?}", a.bottom_line));
        // Wide enough already.
        assert_eq!(
            next(&until(100.0, vec![]), &a, &measured, 1, 500),
            Next::Reached {
                width: advice.width
            }
        );
        // Narrower than that: a size it may add when the advice prefers one, never one
        // it may not; otherwise more repeats, at each size's baseline and the steps around
        // each demand.
        let asked = until(0.5, vec![12, 16]);
        match next(&asked, &a, &measured, 1, 500) {
            Next::Size { nodes } => assert!([12, 16].contains(&nodes)),
            Next::Repeats { points } => {
                assert!(points.contains(&(6, 100.0)), "{points:?}");
                assert!(points.iter().all(|p| measured.contains(&p.0)), "{points:?}");
            }
            other => panic!("{other:?} ({advice:?})"),
        }
        match next(&until(0.5, vec![]), &a, &measured, 1, 500) {
            Next::Repeats { .. } | Next::Stuck { .. } => {}
            other => panic!("no size allowed, yet {other:?}"),
        }
        // Nothing affordable: it says so, with the width as it is.
        match next(&asked, &a, &measured, 1, 0) {
            Next::Stuck { width, why } => {
                assert_eq!(width, Some(advice.width));
                assert!(why.contains("0 runs left"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_tables_are_refused_by_key() {
        assert!(until(25.0, vec![]).check(&[2, 4]).is_ok());
        let e = until(0.0, vec![]).check(&[2, 4]).unwrap_err().to_string();
        assert!(e.contains("`width`"), "{e}");
        let e = until(25.0, vec![4]).check(&[2, 4]).unwrap_err().to_string();
        assert!(e.contains("`sizes`: 4"), "{e}");
        let e = Until {
            budget: 0,
            ..until(25.0, vec![])
        }
        .check(&[2])
        .unwrap_err()
        .to_string();
        assert!(e.contains("`budget`"), "{e}");
    }
}
