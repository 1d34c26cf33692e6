//! From stored runs to what the analysis reads: the bridge between `store` and `analysis`,
//! so that neither knows the other.

use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Result};
use throttle_analysis::table::printable;
use throttle_analysis::{Observation, TimeUnit};

use crate::run_status::RunStatus;
use crate::store::RunRow;

/// Which completion time to analyse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSource {
    /// The job's wall time (rank 0's start to exit).
    Job,
    /// The time the workload reported itself (BFS: the sum of its search times).
    Kernel,
    /// Kernel when every successful run reported one, else job.
    Auto,
}

impl FromStr for TimeSource {
    type Err = String;
    fn from_str(s: &str) -> Result<TimeSource, String> {
        match s {
            "job" => Ok(TimeSource::Job),
            "kernel" => Ok(TimeSource::Kernel),
            "auto" => Ok(TimeSource::Auto),
            other => Err(format!("`{other}` is not auto, job or kernel")),
        }
    }
}

impl fmt::Display for TimeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeSource::Job => "job",
            TimeSource::Kernel => "kernel",
            TimeSource::Auto => "auto",
        })
    }
}

/// The completion time `time` selected in some rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chosen {
    /// The workload's own time (`kernel_seconds`), not the job's wall time.
    pub kernel: bool,
    pub unit: TimeUnit,
    /// What it is, in words.
    pub what: &'static str,
}

/// Whether a run's own time is the inverse of a rate it printed (`--rate-regex`).
fn from_rate(r: &RunRow) -> bool {
    r.metrics
        .as_deref()
        .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
        .is_some_and(|m| m.get("rate").is_some())
}

/// The completion time `time` selects in `rows`. `analyze` and `export` choose alike.
pub fn choose(rows: &[RunRow], time: TimeSource) -> Result<Chosen> {
    let all_kernel = rows
        .iter()
        .filter(|r| r.status == RunStatus::Ok)
        .all(|r| r.kernel_seconds.is_some());
    let kernel = match time {
        TimeSource::Job => false,
        TimeSource::Kernel => {
            if !all_kernel {
                bail!("--time kernel: some runs did not report a kernel time; use --time job");
            }
            true
        }
        TimeSource::Auto => all_kernel,
    };
    let ok = || rows.iter().filter(|r| r.status == RunStatus::Ok);
    let rates = kernel && ok().any(from_rate);
    if rates && !ok().all(from_rate) {
        bail!("some runs' own times are the inverse of a rate they printed (--rate-regex) and others are seconds: they cannot be analysed together; use --time job (wall time), or a store per command");
    }
    Ok(match (kernel, rates) {
        (true, true) => Chosen {
            kernel,
            unit: TimeUnit::InverseRate,
            what: "1/rate: the inverse of the rate the program printed (--rate-regex); CTI is the drop of its rate",
        },
        (true, false) => Chosen {
            kernel,
            unit: TimeUnit::Seconds,
            what: "kernel time reported by the workload (BFS: the sum of its search times; PMM: its multiplication; a command: what --time-regex captured)",
        },
        _ => Chosen {
            kernel,
            unit: TimeUnit::Seconds,
            what: "job completion time (rank 0's start to exit)",
        },
    })
}

/// A run's time as [`choose`] chose it.
pub fn time_of(r: &RunRow, kernel: bool) -> Option<f64> {
    if kernel {
        r.kernel_seconds
    } else {
        r.seconds
    }
}

/// Every run as an observation, with the chosen completion time, and what was chosen.
pub fn observations(rows: &[RunRow], time: TimeSource) -> Result<(Vec<Observation>, Chosen)> {
    let chosen = choose(rows, time)?;
    let kernel = chosen.kernel;
    let obs: Vec<Observation> = rows
        .iter()
        .map(|r| {
            let t = time_of(r, kernel);
            Observation {
                ok: r.status == RunStatus::Ok && t.is_some(),
                series: printable(&r.series),
                procs: r.procs,
                bw_pct: r.bw_pct,
                repeat: r.repeat,
                seconds: t.unwrap_or(0.0),
                nodes: r.nodes,
                busy: r.cpu_busy_before,
                cpu_own: r.cpu_own,
                bytes_sent: r.bytes_sent,
                busiest_bytes: r
                    .fidelity
                    .as_deref()
                    .and_then(crate::fidelity::RunFidelity::busiest_link_bytes_of),
                flag: r.flag.as_deref().map(printable),
                problem: r.problem,
                latency_step: r.latency_step,
            }
        })
        .collect();
    // A store is a file a user may be handed: its rows are checked as a CSV file's are.
    let bad: Vec<String> = obs
        .iter()
        .zip(rows)
        .filter_map(|(o, r)| {
            let p = o.problems();
            (!p.is_empty()).then(|| {
                format!(
                    "the run started {} ({}): {}",
                    printable(&r.started_at),
                    o.series,
                    p.join("; ")
                )
            })
        })
        .collect();
    if !bad.is_empty() {
        bail!(
            "{} stored run(s) are not runs the analysis can use (a damaged or hand-edited store?):\n  {}{}",
            bad.len(),
            bad.iter().take(20).cloned().collect::<Vec<_>>().join("\n  "),
            if bad.len() > 20 {
                format!("\n  ... and {} more", bad.len() - 20)
            } else {
                String::new()
            }
        );
    }
    Ok((obs, chosen))
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttle_proto::Pct;

    fn row(status: RunStatus, kernel: Option<f64>) -> RunRow {
        RunRow {
            seconds: Some(2.0),
            kernel_seconds: kernel,
            status,
            ..RunRow::for_test("k", "s", Pct::FULL, 0)
        }
    }

    #[test]
    fn auto_uses_the_kernel_time_only_when_every_run_has_one() {
        let rows = [row(RunStatus::Ok, Some(1.0)), row(RunStatus::Failed, None)];
        let (obs, chosen) = observations(&rows, TimeSource::Auto).unwrap();
        assert_eq!(obs[0].seconds, 1.0);
        assert!(!obs[1].ok);
        assert!(chosen.what.contains("kernel") && chosen.unit == TimeUnit::Seconds);
        let rows = [row(RunStatus::Ok, Some(1.0)), row(RunStatus::Ok, None)];
        let (obs, _) = observations(&rows, TimeSource::Auto).unwrap();
        assert_eq!(obs[0].seconds, 2.0);
        assert!(observations(&rows, TimeSource::Kernel).is_err());
    }

    #[test]
    fn the_inverse_of_a_rate_is_said_to_be_one_and_never_mixed_with_seconds() {
        let mut rated = row(RunStatus::Ok, Some(5e-7));
        rated.metrics = Some(r#"{"rate":2000000.0}"#.into());
        let (obs, chosen) = observations(&[rated.clone()], TimeSource::Auto).unwrap();
        assert_eq!(obs[0].seconds, 5e-7);
        assert_eq!(chosen.unit, TimeUnit::InverseRate);
        assert!(chosen.what.starts_with("1/rate"), "{}", chosen.what);
        // The wall time is seconds again.
        let (obs, chosen) = observations(&[rated.clone()], TimeSource::Job).unwrap();
        assert_eq!((obs[0].seconds, chosen.unit), (2.0, TimeUnit::Seconds));
        let timed = row(RunStatus::Ok, Some(1.0));
        let e = observations(&[rated, timed], TimeSource::Auto).unwrap_err();
        assert!(e.to_string().contains("--time job"), "{e}");
    }

    #[test]
    fn a_hostile_stores_rows_are_refused_by_name_and_its_labels_cannot_drive_the_terminal() {
        let mut negative = row(RunStatus::Ok, None);
        negative.seconds = Some(-5.0);
        negative.started_at = "2026-11-25T10:00:00Z".into();
        let mut no_nodes = row(RunStatus::Ok, None);
        no_nodes.nodes = 0;
        let e = observations(&[negative, no_nodes], TimeSource::Auto)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("2 stored run(s)")
                && e.contains("2026-11-25T10:00:00Z")
                && e.contains("the time -5")
                && e.contains("nodes 0"),
            "{e}"
        );
        let mut huge = row(RunStatus::Ok, None);
        huge.seconds = Some(1e308);
        assert!(observations(&[huge], TimeSource::Auto).is_err());
        // A failed run without a time is a run.
        let mut failed = row(RunStatus::Failed, None);
        failed.seconds = None;
        assert!(observations(&[failed], TimeSource::Job).is_ok());
        let mut labelled = row(RunStatus::Ok, None);
        labelled.series = "mw \u{1b}[2J\u{1b}]0;owned\u{7}".into();
        labelled.flag = Some("late\r".into());
        let (obs, _) = observations(&[labelled], TimeSource::Auto).unwrap();
        assert!(
            !obs[0].series.chars().any(char::is_control),
            "{}",
            obs[0].series
        );
        assert!(obs[0].series.contains("\\u{1b}[2J"), "{}", obs[0].series);
        assert_eq!(obs[0].flag.as_deref(), Some("late\\u{d}"));
    }
}
