//! From stored runs to what the analysis reads: the bridge between `store` and `analysis`,
//! so that neither knows the other.

use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Result};

use crate::analysis::Observation;
use crate::job::RunStatus;
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

/// Every run as an observation, with the chosen completion time, and a description of
/// the time used (for the output).
pub fn observations(rows: &[RunRow], time: TimeSource) -> Result<(Vec<Observation>, String)> {
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
    let obs = rows
        .iter()
        .map(|r| {
            let t = if kernel { r.kernel_seconds } else { r.seconds };
            Observation {
                ok: r.status == RunStatus::Ok && t.is_some(),
                series: r.series.clone(),
                procs: r.procs,
                bw_pct: r.bw_pct.percent(),
                repeat: r.repeat,
                seconds: t.unwrap_or(0.0),
                nodes: r.nodes,
                busy: r.cpu_busy_before,
                bytes_sent: r.bytes_sent,
                flag: r.flag.clone(),
            }
        })
        .collect();
    let what = if kernel {
        "kernel time reported by the workload (BFS: sum of the search times)"
    } else {
        "job completion time (rank 0's start to exit)"
    };
    Ok((obs, what.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttle_proto::Pct;

    fn row(status: RunStatus, kernel: Option<f64>) -> RunRow {
        RunRow {
            point_key: "k".into(),
            series: "s".into(),
            workload: "bfs".into(),
            options: "{}".into(),
            nodes: 1,
            ranks_per_node: 1,
            procs: 1,
            bw_pct: Pct::FULL,
            capacity: 125e6,
            latency_us: 0,
            repeat: 0,
            started_at: String::new(),
            seconds: Some(2.0),
            kernel_seconds: kernel,
            teps: None,
            status,
            reason: None,
            host: String::new(),
            version: String::new(),
            job: String::new(),
            bytes_sent: None,
            bytes_received: None,
            cpu_busy_before: None,
            cpu_steal: None,
            metrics: None,
            fidelity: None,
            flag: None,
        }
    }

    #[test]
    fn auto_uses_the_kernel_time_only_when_every_run_has_one() {
        let rows = [row(RunStatus::Ok, Some(1.0)), row(RunStatus::Failed, None)];
        let (obs, what) = observations(&rows, TimeSource::Auto).unwrap();
        assert_eq!(obs[0].seconds, 1.0);
        assert!(!obs[1].ok);
        assert!(what.contains("kernel"));
        let rows = [row(RunStatus::Ok, Some(1.0)), row(RunStatus::Ok, None)];
        let (obs, _) = observations(&rows, TimeSource::Auto).unwrap();
        assert_eq!(obs[0].seconds, 2.0);
        assert!(observations(&rows, TimeSource::Kernel).is_err());
    }
}
