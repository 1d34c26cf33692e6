//! What a workload reports: one line `THROTTLE_RESULT {json}` on its standard output.
//!
//! Rank 0 of every workload (ours and the user's) prints one [`WorkloadResult`]; the agent
//! keeps it with the rank's report and the controller stores its time and metrics. All
//! fields but `seconds` may be left out, so a user's program can report just its time:
//! `THROTTLE_RESULT {"seconds": 12.5}`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Prefix of the line a rank prints with its result.
pub const RESULT_PREFIX: &str = "THROTTLE_RESULT ";

/// A workload's own account of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct WorkloadResult {
    /// Which workload (`bfs`, `pmm`, a program's name).
    #[serde(default)]
    pub workload: String,
    /// The workload's own completion time in seconds (BFS: the sum of its search times;
    /// PMM: the multiplication): what `analyze --time kernel` uses.
    #[serde(default)]
    pub seconds: Option<f64>,
    /// The workload's check of its own output.
    #[serde(default)]
    pub check: Check,
    /// Named figures (`harmonic_mean_teps`, `gflops`, `comm_share`, ...).
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
    /// Everything else the workload reports, kept as it came.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub detail: serde_json::Value,
}

impl WorkloadResult {
    /// The result line: prefix and JSON.
    pub fn line(&self) -> String {
        format!(
            "{RESULT_PREFIX}{}",
            serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
        )
    }

    /// Parse a line of a rank's output, if it is a result line.
    pub fn from_line(line: &str) -> Option<Result<WorkloadResult, serde_json::Error>> {
        line.strip_prefix(RESULT_PREFIX).map(serde_json::from_str)
    }

    /// A named metric.
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.metrics.get(name).copied()
    }
}

/// A workload's check of its output (BFS validation, PMM verification).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Check {
    /// Not run (switched off, or the workload has none).
    #[default]
    Off,
    Passed,
    /// The first failure found.
    Failed(String),
}

impl fmt::Display for Check {
    /// `off`, `passed`, `failed: <reason>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Off => f.write_str("off"),
            Check::Passed => f.write_str("passed"),
            Check::Failed(r) => write!(f, "failed: {r}"),
        }
    }
}

impl Serialize for Check {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Check {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Check, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "off" | "" => Check::Off,
            "passed" => Check::Passed,
            other => Check::Failed(other.strip_prefix("failed: ").unwrap_or(other).to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_line_from_a_users_program_parses() {
        let r = WorkloadResult::from_line(r#"THROTTLE_RESULT {"seconds": 12.5}"#)
            .unwrap()
            .unwrap();
        assert_eq!(r.seconds, Some(12.5));
        assert_eq!(r.check, Check::Off);
        assert!(WorkloadResult::from_line("hello").is_none());
        assert!(WorkloadResult::from_line("THROTTLE_RESULT {bad")
            .unwrap()
            .is_err());
    }

    #[test]
    fn round_trips_with_a_failed_check() {
        let r = WorkloadResult {
            workload: "bfs".into(),
            seconds: Some(1.5),
            check: Check::Failed("parent of 7 is not adjacent".into()),
            metrics: [("harmonic_mean_teps".to_string(), 3e8)].into(),
            detail: serde_json::json!({"scale": 16}),
        };
        let back = WorkloadResult::from_line(&r.line()).unwrap().unwrap();
        assert_eq!(back, r);
        assert_eq!(back.metric("harmonic_mean_teps"), Some(3e8));
    }
}
