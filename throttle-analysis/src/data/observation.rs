//! One run as the analysis sees it, from the store or a CSV file, and what makes a row
//! no run at all. Both sources are files a user is handed: a hostile one must get a
//! clear refusal, not `T(p) = NaN` (a CSV's 1e308 seconds overflowed the sums of
//! squares) or a negative time (a store's), and its labels must not drive the terminal
//! (control characters are written out as escapes).

use throttle_proto::Pct;

/// One run, from the store or a CSV file.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// Workload and its options: runs are only compared within one series.
    pub series: String,
    pub procs: u32,
    /// The run's setting (unlimited runs are not used by the analysis).
    pub bw_pct: Pct,
    pub repeat: u32,
    pub seconds: f64,
    pub ok: bool,
    /// Nodes the processes ran on.
    pub nodes: u32,
    /// Share of the machine's CPUs busy just before the run (see `load`), if recorded.
    pub busy: Option<f64>,
    /// Share of the machine's cores, 0..1, the run's own processes used over the run (a
    /// local cluster's agents and ranks, a command's processes), if recorded: a size whose
    /// runs kept the cores busy is CPU-bound ([`crate::trust::cpu`]).
    pub cpu_own: Option<f64>,
    /// Bytes the run's nodes sent through their agents, if recorded.
    pub bytes_sent: Option<u64>,
    /// The most bytes one node's link carried in one direction, if recorded (from the
    /// run's proof).
    pub busiest_bytes: Option<u64>,
    /// Why the run's links did not run at their setting (`fidelity`), when they did not.
    pub flag: Option<String>,
    /// The problem's size, where the series has a problem axis (`[problem]` of a sweep);
    /// see [`crate::analyze::problem`].
    pub problem: Option<f64>,
    /// The added one-way latency of a sweep's latency point, us (`latencies`: the full
    /// link with it added); `None` for a run at a bandwidth step. Latency points are
    /// analysed for the latency demand alone ([`crate::method::latency`]).
    pub latency_step: Option<u64>,
}

/// The longest time a run may report, seconds (about 31 years): beyond it a figure is no
/// measurement, and its squares overflow.
pub const MAX_SECONDS: f64 = 1e9;

/// The largest added latency a run may carry, us (a link's largest).
pub const MAX_LATENCY_US: u64 = throttle_proto::shape::MAX_LATENCY_US;

/// The largest problem value a run may carry: beyond it (2^53) not every whole number
/// is one.
pub const MAX_PROBLEM: f64 = 9.007_199_254_740_992e15;

impl Observation {
    /// What makes this row no run the analysis can use, one phrase per problem (empty:
    /// none).
    pub fn problems(&self) -> Vec<String> {
        let mut bad = Vec::new();
        if self.procs == 0 {
            bad.push("procs 0 is not a whole number > 0".to_string());
        }
        if self.nodes == 0 {
            bad.push("nodes 0 is not a whole number > 0".to_string());
        } else if self.procs > 0 && self.nodes > self.procs {
            bad.push(format!(
                "nodes {} is more than procs {} (every node runs at least one process)",
                self.nodes, self.procs
            ));
        }
        if self.ok
            && !(self.seconds.is_finite() && self.seconds > 0.0 && self.seconds <= MAX_SECONDS)
        {
            let t = self.seconds;
            let t = if t.is_finite() && t.abs() >= 1e6 {
                format!("{t:e}")
            } else {
                format!("{t}")
            };
            bad.push(format!(
                "the time {t} is not a positive number of seconds up to {MAX_SECONDS:e}"
            ));
        }
        if let Some(b) = self.busy {
            if !(0.0..=1.0).contains(&b) {
                bad.push(format!("cpu_busy_before {b} is not a share from 0 to 1"));
            }
        }
        if let Some(b) = self.cpu_own {
            if !(0.0..=1.0).contains(&b) {
                bad.push(format!("cpu_own {b} is not a share from 0 to 1"));
            }
        }
        if let Some(n) = self.problem {
            if !(n.is_finite() && n > 0.0 && n <= MAX_PROBLEM) {
                bad.push(format!(
                    "the problem value {n} is not a positive number up to {MAX_PROBLEM:e}"
                ));
            }
        }
        if let Some(l) = self.latency_step {
            if l > MAX_LATENCY_US {
                bad.push(format!(
                    "the latency step {l} us is more than a link adds ({MAX_LATENCY_US} us)"
                ));
            }
        }
        if self.series.trim().is_empty() {
            bad.push("the workload is empty".to_string());
        }
        bad
    }
}

#[cfg(test)]
impl Observation {
    /// A successful run on one node for tests, not busy, without bytes or flag: callers
    /// set what they test with struct update syntax.
    pub fn for_test(series: &str, procs: u32, bw_pct: Pct, repeat: u32, seconds: f64) -> Self {
        Observation {
            series: series.into(),
            procs,
            bw_pct,
            repeat,
            seconds,
            ok: true,
            nodes: 1,
            busy: None,
            cpu_own: None,
            bytes_sent: None,
            busiest_bytes: None,
            flag: None,
            problem: None,
            latency_step: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> Observation {
        Observation {
            series: "x".into(),
            procs: 4,
            bw_pct: crate::data::cells::pct(50.0),
            repeat: 0,
            seconds: 1.5,
            ok: true,
            nodes: 2,
            busy: Some(0.1),
            cpu_own: None,
            bytes_sent: None,
            busiest_bytes: None,
            flag: None,
            problem: None,
            latency_step: None,
        }
    }

    #[test]
    fn a_run_that_cannot_be_is_named_for_what_is_wrong() {
        assert!(run().problems().is_empty());
        for (bad, want) in [
            (
                Observation {
                    seconds: -5.0,
                    ..run()
                },
                "the time -5",
            ),
            (
                Observation {
                    seconds: 1e308,
                    ..run()
                },
                "the time 1e308",
            ),
            (
                Observation {
                    seconds: f64::NAN,
                    ..run()
                },
                "the time NaN",
            ),
            (Observation { nodes: 0, ..run() }, "nodes 0"),
            (
                Observation {
                    problem: Some(f64::INFINITY),
                    ..run()
                },
                "the problem value inf",
            ),
            (
                Observation {
                    problem: Some(-1.0),
                    ..run()
                },
                "the problem value -1",
            ),
            (Observation { procs: 0, ..run() }, "procs 0"),
            (Observation { nodes: 8, ..run() }, "more than procs"),
            (
                Observation {
                    busy: Some(2.0),
                    ..run()
                },
                "cpu_busy_before 2",
            ),
            (
                Observation {
                    cpu_own: Some(-0.5),
                    ..run()
                },
                "cpu_own -0.5",
            ),
            (
                Observation {
                    series: " ".into(),
                    ..run()
                },
                "workload is empty",
            ),
        ] {
            let p = bad.problems();
            assert!(p.iter().any(|p| p.contains(want)), "{want}: {p:?}");
        }
        // A failed run needs no time.
        let failed = Observation {
            ok: false,
            seconds: 0.0,
            ..run()
        };
        assert!(failed.problems().is_empty());
    }
}
