//! The problem axis of a sweep (`[problem]` in the spec): the size of the problem as a
//! second parameter beside the node count, crossed with it (`values`), grown with it
//! (`per_proc`: weak scaling) or paired with it (`pairs`), and which option of each
//! workload it sets. A sweep with a problem axis is one sweep per value, each of the node
//! counts that value is measured at, stored under one series with the value in every run.

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};
use throttle_proto::workload::Options;

use crate::external::template;

/// The most problem values one sweep measures.
const MAX_VALUES: usize = 64;

/// The largest problem value: 2^53, beyond which the store's numbers (and the
/// analysis's) no longer tell every whole number apart.
pub const MAX_VALUE: u64 = 1 << 53;

/// `[problem]`: one of `values`, `per_proc` or `pairs`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Problem {
    /// Every node count at every value (crossed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<u64>,
    /// Weak scaling: at each node count the value is `per_proc` x processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_proc: Option<u64>,
    /// (node count, value) pairs: a table of sizes and their problems.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<(usize, u64)>,
}

/// One problem value and the node counts it is measured at.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// The value, as the workload's option takes it.
    pub value: u64,
    /// The node counts measured at it, ascending.
    pub nodes: Vec<usize>,
}

impl Problem {
    /// Each value with the node counts of `nodes` it is measured at, values ascending.
    pub fn cells(&self, nodes: &[usize], ranks_per_node: usize) -> Result<Vec<Cell>> {
        let given = [
            !self.values.is_empty(),
            self.per_proc.is_some(),
            !self.pairs.is_empty(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            bail!("[problem] needs exactly one of `values` (every node count at every value), `per_proc` (weak scaling: the value is per_proc x processes) or `pairs` ([[nodes, value], ...])");
        }
        if self.values.len() > MAX_VALUES || self.pairs.len() > MAX_VALUES * nodes.len().max(1) {
            bail!("[problem] lists more values than a sweep takes ({MAX_VALUES} values)");
        }
        let mut pairs: Vec<(usize, u64)> = Vec::new();
        if !self.values.is_empty() {
            for &v in &self.values {
                pairs.extend(nodes.iter().map(|&n| (n, v)));
            }
        } else if let Some(per) = self.per_proc {
            for &n in nodes {
                let v = per
                    .checked_mul((n * ranks_per_node) as u64)
                    .ok_or_else(|| anyhow!("[problem] per_proc {per} x {n} nodes overflows"))?;
                pairs.push((n, v));
            }
        } else {
            for &(n, _) in &self.pairs {
                if !nodes.contains(&n) {
                    bail!("[problem] pairs: node count {n} is not in `nodes` ({nodes:?})");
                }
            }
            if let Some(n) = nodes
                .iter()
                .find(|n| !self.pairs.iter().any(|(m, _)| m == *n))
            {
                bail!("[problem] pairs: node count {n} of `nodes` has no pair: add one, or leave it out of `nodes`");
            }
            pairs = self.pairs.clone();
        }
        if pairs.iter().any(|&(_, v)| v == 0 || v > MAX_VALUE) {
            bail!("[problem] values must be whole numbers from 1 to 2^53 ({MAX_VALUE})");
        }
        let mut values: Vec<u64> = pairs.iter().map(|p| p.1).collect();
        values.sort_unstable();
        values.dedup();
        if values.len() > MAX_VALUES {
            bail!(
                "[problem] has {} values; a sweep takes at most {MAX_VALUES}",
                values.len()
            );
        }
        Ok(values
            .into_iter()
            .map(|value| {
                let mut at: Vec<usize> =
                    pairs.iter().filter(|p| p.1 == value).map(|p| p.0).collect();
                at.sort_unstable();
                at.dedup();
                Cell { value, nodes: at }
            })
            .collect())
    }
}

/// The option of `options` a problem value sets, in the words a spec uses (a command's
/// `{n}`); an error for a workload without one.
pub fn key(options: &Options) -> Result<&'static str> {
    Ok(match options {
        Options::Bfs(_) => "scale",
        Options::Pmm(_) => "size",
        Options::Mw(_) => "volume",
        Options::Command(_) => "{n}",
        Options::Program(_) | Options::LogGps(_) => bail!(
            "workload = \"{}\" has no problem size: sweep it as workload = \"command\" with {{n}} in its run line",
            options.name()
        ),
    })
}

/// `options` with the problem value `n`: a BFS's scale (2^n vertices), a PMM's matrix
/// order, a master/worker's volume per iteration (bytes; its work grows alike: the
/// section's `compute_seconds` is the work of the section's `volume`), a command's `{n}`.
pub fn apply(options: &Options, n: u64) -> Result<Options> {
    key(options)?;
    Ok(match options {
        Options::Bfs(o) => {
            let scale = u32::try_from(n)
                .map_err(|_| anyhow!("[problem] a bfs scale of {n} is out of range"))?;
            Options::Bfs(throttle_proto::workload::BfsOptions { scale, ..o.clone() })
        }
        Options::Pmm(o) => Options::Pmm(throttle_proto::workload::PmmOptions {
            size: usize::try_from(n).map_err(|_| anyhow!("[problem] size {n} is out of range"))?,
            ..o.clone()
        }),
        Options::Mw(o) => {
            if o.volume == 0 {
                bail!("[problem] with mw sets the volume, and the work grows with it from the [mw] section's: give that section a volume above 0");
            }
            Options::Mw(throttle_proto::workload::MwOptions {
                volume: n,
                compute_seconds: o.compute_seconds * n as f64 / o.volume as f64,
                ..o.clone()
            })
        }
        Options::Command(o) => {
            let run = template::with_problem(&o.run, n).ok_or_else(|| {
                anyhow!("[problem] needs `{{n}}` in the command's run line, where each value goes")
            })?;
            Options::Command(throttle_proto::workload::CommandOptions { run, ..o.clone() })
        }
        Options::Program(_) | Options::LogGps(_) => unreachable!("refused by key"),
    })
}

/// What the analysis calls the problem values of runs of `workload` (as the store names
/// it) and how its models take them: a BFS's scale is log2 of its vertices.
pub fn axis(workload: &str) -> throttle_analysis::data::problem::ProblemAxis {
    use throttle_analysis::data::problem::ProblemAxis;
    match workload {
        "bfs" => ProblemAxis {
            name: "scale".into(),
            log2: true,
        },
        "pmm" => ProblemAxis::linear("size"),
        "mw" => ProblemAxis::linear("volume"),
        _ => ProblemAxis::linear("n"),
    }
}

/// The workload's options as the series' name shows them: the problem's option written
/// `"{n}"` (a command's run line has it already).
pub fn named(options: &Options) -> Result<serde_json::Value> {
    let mut json = options.to_json();
    let k = key(options)?;
    if let Some(m) = json.as_object_mut().filter(|_| !k.starts_with('{')) {
        m.insert(k.to_string(), serde_json::Value::String("{n}".into()));
    }
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttle_proto::workload::{CommandOptions, MwOptions};

    #[test]
    fn values_cross_per_proc_grows_pairs_pair() {
        // Each value with its node counts.
        let cells = |p: Problem, rpn: usize| -> Vec<(u64, Vec<usize>)> {
            p.cells(&[2, 4], rpn)
                .unwrap()
                .into_iter()
                .map(|c| (c.value, c.nodes))
                .collect()
        };
        let values = Problem {
            values: vec![12, 11],
            ..Problem::default()
        };
        assert_eq!(cells(values, 1), [(11, vec![2, 4]), (12, vec![2, 4])]);
        let weak = Problem {
            per_proc: Some(1000),
            ..Problem::default()
        };
        assert_eq!(cells(weak, 2), [(4000, vec![2]), (8000, vec![4])]);
        let pairs = Problem {
            pairs: vec![(2, 11), (4, 12), (4, 11)],
            ..Problem::default()
        };
        assert_eq!(cells(pairs, 1), [(11, vec![2, 4]), (12, vec![4])]);
        for (bad, want) in [
            (Problem::default(), "exactly one"),
            (
                Problem {
                    values: vec![1],
                    per_proc: Some(1),
                    ..Problem::default()
                },
                "exactly one",
            ),
            (
                Problem {
                    pairs: vec![(8, 1)],
                    ..Problem::default()
                },
                "not in `nodes`",
            ),
            (
                Problem {
                    pairs: vec![(2, 1)],
                    ..Problem::default()
                },
                "4 of `nodes` has no pair",
            ),
            (
                Problem {
                    values: vec![0],
                    ..Problem::default()
                },
                "from 1 to 2^53",
            ),
            (
                Problem {
                    per_proc: Some(u64::MAX),
                    ..Problem::default()
                },
                "overflows",
            ),
            (
                Problem {
                    values: vec![(1 << 53) + 1],
                    ..Problem::default()
                },
                "to 2^53",
            ),
            (
                Problem {
                    values: (1..=65).collect(),
                    ..Problem::default()
                },
                "(64 values)",
            ),
        ] {
            let e = bad.cells(&[2, 4], 1).unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn each_workload_takes_the_value_where_its_problem_is() {
        let mw = Options::Mw(MwOptions {
            volume: 1000,
            compute_seconds: 0.5,
            ..MwOptions::default()
        });
        let Options::Mw(o) = apply(&mw, 4000).unwrap() else {
            panic!()
        };
        assert_eq!((o.volume, o.compute_seconds), (4000, 2.0));
        let cmd = Options::Command(CommandOptions {
            run: "./a --n {n}".into(),
            time_regex: None,
            rate_regex: None,
            intercept: None,
        });
        let Options::Command(o) = apply(&cmd, 7).unwrap() else {
            panic!()
        };
        assert_eq!(o.run, "./a --n 7");
        let without = Options::Command(CommandOptions {
            run: "./a".into(),
            ..o
        });
        assert!(apply(&without, 7).unwrap_err().to_string().contains("{n}"));
        let named = named(&mw).unwrap();
        assert_eq!(named["volume"], "{n}");
    }
}
