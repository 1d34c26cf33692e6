//! Jobs between the controller and the agents: what to launch, and how it went.
//!
//! `POST /jobs/{job}/launch` takes a [`LaunchSpec`]; `GET /jobs/{job}` answers a
//! [`JobReport`] (this node's ranks, each with its [`RankState`], output tail and
//! [`WorkloadResult`]); `GET /jobs` a [`JobList`].

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::durations::{Lease, TimeLimit};
use crate::name::Name;
use crate::result::WorkloadResult;

/// What the controller asks an agent to start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchSpec {
    /// Program name (on the agent's allow-list) or path (inside an allowed place).
    pub program: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Node of every rank (index = rank).
    pub ranks: Vec<Name>,
    /// Seconds before the job is killed.
    #[serde(default)]
    pub time_limit_s: TimeLimit,
    /// Seconds the job lives without a renewal from the controller (`POST
    /// /jobs/{job}/renew`); then its ranks are killed and the job is forgotten.
    #[serde(default)]
    pub lease_s: Lease,
}

/// The answer to a launch: the ranks started on this node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launched {
    pub job: Name,
    pub local_ranks: Vec<u32>,
}

/// The body of `PUT /jobs/{job}`: a rank-to-node map without a launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobMap {
    pub ranks: Vec<Name>,
}

/// How a rank is doing.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RankState {
    Running,
    Exited { code: i32 },
    Signaled { signal: i32 },
    Killed { reason: String },
    FailedToStart { error: String },
}

impl RankState {
    pub fn finished(&self) -> bool {
        !matches!(self, RankState::Running)
    }

    pub fn succeeded(&self) -> bool {
        matches!(self, RankState::Exited { code: 0 })
    }

    /// Whether the rank failed by itself (rather than being killed because of another).
    pub fn failed_by_itself(&self) -> bool {
        matches!(
            self,
            RankState::Exited { .. } | RankState::Signaled { .. } | RankState::FailedToStart { .. }
        ) && !self.succeeded()
    }

    /// What happened, for people: `exited with code 7`, `was killed: time limit ...`.
    pub fn describe(&self) -> String {
        match self {
            RankState::Running => "is still running".into(),
            RankState::Exited { code } => format!("exited with code {code}"),
            RankState::Signaled { signal } => format!("was killed by signal {signal}"),
            RankState::Killed { reason } => format!("was killed: {reason}"),
            RankState::FailedToStart { error } => format!("failed to start: {error}"),
        }
    }
}

/// One rank as reported by the API.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RankReport {
    pub rank: u32,
    pub pid: Option<u32>,
    #[serde(flatten)]
    pub state: RankState,
    pub output_tail: Vec<String>,
    /// The rank's `THROTTLE_RESULT` line, if it printed one.
    pub result: Option<WorkloadResult>,
    /// Wall time from start to exit (or until now).
    pub seconds: f64,
}

/// A job's state on one node (or, at the controller, over all nodes).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Running,
    Succeeded,
    Failed,
}

impl JobState {
    /// The state of a job whose ranks are in `ranks`.
    pub fn of<'a>(ranks: impl IntoIterator<Item = &'a RankState> + Clone) -> JobState {
        if ranks.clone().into_iter().any(|r| !r.finished()) {
            JobState::Running
        } else if ranks.into_iter().all(|r| r.succeeded()) {
            JobState::Succeeded
        } else {
            JobState::Failed
        }
    }
}

/// This node's part of a job.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct JobReport {
    pub job: Name,
    pub node: Name,
    pub state: JobState,
    pub reason: Option<String>,
    /// Seconds left before the lease runs out (0 once it has).
    #[serde(default)]
    pub lease_left_s: f64,
    pub ranks: Vec<RankReport>,
}

impl JobReport {
    /// Why the job failed on this node: the rank that failed by itself (rather than one
    /// killed because of it), its state and the end of its output.
    pub fn failure(&self) -> String {
        let failed = self
            .ranks
            .iter()
            .find(|k| k.state.failed_by_itself())
            .or_else(|| self.ranks.iter().find(|k| !k.state.succeeded()));
        match failed {
            Some(k) => {
                let tail: Vec<&str> = k
                    .output_tail
                    .iter()
                    .rev()
                    .take(5)
                    .rev()
                    .map(String::as_str)
                    .collect();
                format!(
                    "rank {} on node `{}` {}{}",
                    k.rank,
                    self.node,
                    k.state.describe(),
                    if tail.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", tail.join(" | "))
                    }
                )
            }
            None => self
                .reason
                .clone()
                .unwrap_or_else(|| "the job failed".into()),
        }
    }
}

/// The body of `GET /jobs`: rank maps and launched jobs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct JobList {
    /// Rank-to-node maps held (launched jobs and `PUT /jobs/{job}` alike).
    pub jobs: HashMap<Name, Vec<Name>>,
    /// Jobs launched on this node.
    pub launched: Vec<JobReport>,
}

impl JobList {
    /// Every job name this node holds.
    pub fn names(&self) -> Vec<Name> {
        let mut names: Vec<Name> = self
            .jobs
            .keys()
            .cloned()
            .chain(self.launched.iter().map(|j| j.job.clone()))
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_failures_read_well() {
        let rank = |rank, state| RankReport {
            rank,
            pid: None,
            state,
            output_tail: vec!["boom".into()],
            result: None,
            seconds: 1.0,
        };
        let r = JobReport {
            job: Name::parse("job", "j").unwrap(),
            node: Name::parse("node", "n1").unwrap(),
            state: JobState::Failed,
            reason: Some("rank 1 failed".into()),
            lease_left_s: 3.0,
            ranks: vec![
                rank(
                    0,
                    RankState::Killed {
                        reason: "rank 1 failed".into(),
                    },
                ),
                rank(1, RankState::Exited { code: 7 }),
            ],
        };
        assert_eq!(r.failure(), "rank 1 on node `n1` exited with code 7: boom");
        assert_eq!(
            JobState::of(r.ranks.iter().map(|k| &k.state)),
            JobState::Failed
        );
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"state\":\"failed\""), "{json}");
        assert_eq!(serde_json::from_str::<JobReport>(&json).unwrap(), r);
    }

    #[test]
    fn launch_specs_have_defaults_and_refuse_unknown_fields() {
        let s: LaunchSpec =
            serde_json::from_str(r#"{"program":"throttle-bfs","ranks":["n0"]}"#).unwrap();
        assert_eq!(s.time_limit_s, TimeLimit::DEFAULT);
        assert_eq!(s.lease_s, Lease::DEFAULT);
        assert!(serde_json::from_str::<LaunchSpec>(
            r#"{"program":"x","ranks":["n0"],"shell":true}"#
        )
        .is_err());
        assert!(serde_json::from_str::<LaunchSpec>(r#"{"program":"x","ranks":[".."]}"#).is_err());
    }
}
