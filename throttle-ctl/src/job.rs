//! One job on the cluster's first N nodes at one bandwidth: the step `run`, `sweep` and
//! `demo` are made of.
//!
//! [`execute`] sets the bandwidth on those nodes (through the command's
//! [`LinkLease`], which renews it and puts it back), asks each node's agent to launch its
//! ranks (block placement: ranks 0..R-1 on the first node, ...), polls until every rank
//! finished or one failed (then kills the job everywhere), and always removes the job
//! from the agents afterwards, so nothing is left running whatever happens. While it
//! waits it renews the job's lease on every node; if this process is killed outright, the
//! agents kill the job themselves when the lease runs out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use serde::Serialize;
use throttle_proto::job::{JobReport, JobState, LaunchSpec};
use throttle_proto::result::{Check, WorkloadResult};
use throttle_proto::shape::ShapeChange;
use throttle_proto::status::Status;
use throttle_proto::{Name, Pct, TimeLimit};

use crate::cluster::agent_client::AgentClient;
use crate::cluster::{Cluster, Node};
use crate::external;
use crate::fidelity::{Reading, RunFidelity};
use crate::link_lease::LinkLease;
use crate::run_status::RunStatus;
use crate::workload::Workload;

/// One job: what, where, at which bandwidth, for how long.
#[derive(Clone, Debug)]
pub struct JobSpec {
    pub workload: Workload,
    pub nodes: usize,
    pub ranks_per_node: usize,
    pub bw: Pct,
    /// Added one-way latency to set with the bandwidth (a sweep's latency points); `None`
    /// leaves the nodes' latency as it is.
    pub latency_us: Option<u64>,
    pub time_limit: TimeLimit,
    /// Prefix of the job's name, so that a sweep can find its own leftovers.
    pub job_prefix: Option<String>,
}

/// What happened, for printing and for the results store.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// The job's name (empty when it never started).
    pub job: String,
    pub workload: String,
    pub nodes: usize,
    pub ranks_per_node: usize,
    pub procs: usize,
    pub bw_pct: Pct,
    pub capacity_bytes_per_sec: f64,
    pub latency_us: u64,
    pub status: RunStatus,
    pub reason: Option<String>,
    /// Job completion time: rank 0's wall time from start to exit, as its agent measured
    /// it (the controller's launch-to-done time when rank 0 has no report).
    pub seconds: f64,
    /// Rank 0's result line: the workload's own time, check and metrics.
    pub result: Option<WorkloadResult>,
    /// The output kept: a command's lines as they came (whole up to 1 MiB, then its last
    /// lines); rank 0's last lines for a workload the agents launch.
    pub output: Vec<String>,
    /// Whether the nodes' links ran at their setting meanwhile (`None` when an agent did
    /// not answer a reading, or restarted).
    pub fidelity: Option<RunFidelity>,
}

impl Outcome {
    /// A run that could not be started (a node unreachable, a launch refused).
    pub fn not_started(cluster: &Cluster, spec: &JobSpec, reason: String) -> Outcome {
        Outcome::of(
            String::new(),
            spec,
            (cluster.file.capacity.bytes_per_sec(), 0),
            (RunStatus::Failed, Some(reason)),
        )
    }

    /// Job `job` of `spec` on a link of (capacity in bytes/s, added latency in us) that
    /// ended with (status, reason); no time, result, output or proof yet.
    fn of(
        job: String,
        spec: &JobSpec,
        (capacity_bytes_per_sec, latency_us): (f64, u64),
        (status, reason): (RunStatus, Option<String>),
    ) -> Outcome {
        Outcome {
            job,
            workload: spec.workload.name().to_string(),
            nodes: spec.nodes,
            ranks_per_node: spec.ranks_per_node,
            procs: spec.nodes * spec.ranks_per_node,
            bw_pct: spec.bw,
            capacity_bytes_per_sec,
            latency_us,
            status,
            reason,
            seconds: 0.0,
            result: None,
            output: Vec::new(),
            fidelity: None,
        }
    }

    /// Why the run cannot be trusted as a run at its setting, when it cannot.
    pub fn flag(&self) -> Option<String> {
        self.fidelity.as_ref().and_then(RunFidelity::summary)
    }

    /// The workload's own time (kernel seconds), when it reported one.
    pub fn kernel_seconds(&self) -> Option<f64> {
        self.result.as_ref().and_then(|r| r.seconds)
    }

    /// BFS's harmonic-mean TEPS, when reported.
    pub fn teps(&self) -> Option<f64> {
        self.result
            .as_ref()
            .and_then(|r| r.metric("harmonic_mean_teps"))
    }

    /// The workload's check, when it reported one.
    pub fn check(&self) -> Option<&Check> {
        self.result.as_ref().map(|r| &r.check)
    }
}

fn job_name(prefix: Option<&str>, workload: &str) -> Result<Name> {
    let mut b = [0u8; 3];
    let _ = getrandom::getrandom(&mut b);
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let name = format!("{workload}-{ms}-{:02x}{:02x}{:02x}", b[0], b[1], b[2]);
    let name = match prefix {
        Some(p) => format!("{p}-{name}"),
        None => name,
    };
    Name::parse("job name", &name).map_err(|e| anyhow!("{e}"))
}

/// Run one job, its nodes set to its bandwidth through `links` (which renews it, and puts
/// it back when the command ends); `Err` only when the job could not be started at all.
/// When `cancel` becomes true the job is killed everywhere and the outcome says
/// `interrupted`.
pub fn execute(
    cluster: &Cluster,
    links: &LinkLease,
    spec: &JobSpec,
    cancel: &AtomicBool,
) -> Result<Outcome> {
    check_spec(cluster, spec)?;
    let nodes = &cluster.file.nodes[..spec.nodes];
    // Agents started by hand, by deploy or by Slurm know no other node until told.
    crate::cluster::directory::ensure(cluster, nodes)?;
    let clients: Vec<AgentClient> = nodes.iter().map(|n| AgentClient::new(cluster, n)).collect();
    // The run's shape holds only while this process renews it: killed outright, it
    // leaves no node at the run's bandwidth for longer than the lease.
    let change = ShapeChange {
        pct: Some(spec.bw),
        latency_us: spec.latency_us,
        ..ShapeChange::default()
    };
    let shape = links.set(&(0..spec.nodes).collect::<Vec<_>>(), change)?;
    let job = job_name(spec.job_prefix.as_deref(), spec.workload.name())?;
    let run = Shaped {
        cluster,
        links,
        spec,
        nodes,
        clients: &clients,
        job,
        shape,
    };
    let outcome = match spec.workload.launch() {
        Some((program, args)) => run.launch(program, args, cancel)?,
        None => run.command(cancel)?,
    };
    Ok(judge(outcome, links.broken()))
}

/// A run that ended well while its bandwidth may not have held (`broken`: why) is a
/// failed run.
fn judge(mut o: Outcome, broken: Option<String>) -> Outcome {
    if let (RunStatus::Ok, Some(why)) = (o.status, broken) {
        o.status = RunStatus::Failed;
        o.reason = Some(why);
    }
    o
}

/// An error when the cluster lacks the nodes `spec` asks for, its ranks per node are out
/// of range, or its workload cannot run on that many processes.
fn check_spec(cluster: &Cluster, spec: &JobSpec) -> Result<()> {
    if spec.nodes == 0 || spec.nodes > cluster.file.nodes.len() {
        bail!(
            "--nodes {} is not available: the cluster file lists {} nodes ({})",
            spec.nodes,
            cluster.file.nodes.len(),
            cluster.node_names().join(", ")
        );
    }
    if spec.ranks_per_node == 0 || spec.ranks_per_node > 256 {
        bail!("--ranks-per-node must be between 1 and 256");
    }
    spec.workload
        .check_procs(spec.nodes * spec.ranks_per_node)?;
    if cluster.file.local_dir.is_some() {
        spec.workload
            .check_memory_here(spec.nodes, spec.ranks_per_node)?;
    }
    Ok(())
}

/// A job whose nodes run at its bandwidth, about to be run.
struct Shaped<'a> {
    cluster: &'a Cluster,
    /// Renews the job's lease with the shape's, and says when a node did not.
    links: &'a LinkLease,
    spec: &'a JobSpec,
    nodes: &'a [Node],
    clients: &'a [AgentClient],
    job: Name,
    /// The shape the nodes reported once set (the last node's).
    shape: Status,
}

impl Shaped<'_> {
    /// The job's outcome with `status`, `reason` and `fidelity`; no time, result or
    /// output yet.
    fn outcome(
        &self,
        status: RunStatus,
        reason: Option<String>,
        fidelity: Option<RunFidelity>,
    ) -> Outcome {
        Outcome {
            fidelity,
            ..Outcome::of(
                self.job.to_string(),
                self.spec,
                (self.shape.capacity.bytes_per_sec(), self.shape.latency_us),
                (status, reason),
            )
        }
    }

    /// The pacing and CPU accounts of the nodes, read around the run: its proof.
    fn proof(&self, before: Option<Reading>) -> Option<RunFidelity> {
        let after = Reading::take(self.clients).ok()?;
        RunFidelity::between(&before?, &after)
    }

    /// Run the workload's command on this host ([`external::run`]) for the nodes.
    fn command(&self, cancel: &AtomicBool) -> Result<Outcome> {
        let spec = self.spec;
        let command = spec
            .workload
            .command()
            .ok_or_else(|| anyhow!("a workload without a program"))?;
        let invocation = external::Invocation {
            template: &command.template,
            time_regex: command.time_regex.as_ref(),
            ranks_per_node: spec.ranks_per_node,
            bw: spec.bw,
            time_limit: spec.time_limit.duration(),
            intercept: command.intercept,
        };
        let before = Reading::take(self.clients).ok();
        let ended = external::run(self.cluster, self.nodes, &invocation, cancel)?;
        let fidelity = self.proof(before);
        let status = match (ended.ok, ended.interrupted) {
            (true, _) => RunStatus::Ok,
            (false, true) => RunStatus::Interrupted,
            (false, false) => RunStatus::Failed,
        };
        Ok(Outcome {
            seconds: ended.wall_seconds,
            result: ended.result,
            output: ended.output,
            ..self.outcome(status, ended.reason, fidelity)
        })
    }

    /// Have every node's agent launch its ranks of `program`, wait for them, and remove
    /// the job from the agents; the time is rank 0's.
    fn launch(&self, program: String, args: Vec<String>, cancel: &AtomicBool) -> Result<Outcome> {
        let (spec, clients, job) = (self.spec, self.clients, &self.job);
        let ranks: Vec<Name> = (0..spec.nodes * spec.ranks_per_node)
            .map(|r| self.nodes[r / spec.ranks_per_node].name.clone())
            .collect();
        let launch = LaunchSpec {
            program,
            args,
            env: Default::default(),
            ranks,
            time_limit_s: spec.time_limit,
            lease_s: self.links.lease(),
        };
        let before = Reading::take(clients).ok();
        let start = Instant::now();
        for (k, c) in clients.iter().enumerate() {
            if let Err(e) = c.launch(job, &launch) {
                for l in &clients[..k] {
                    let _ = l.delete_job(job);
                }
                return Err(e);
            }
        }
        // Renewed with the shape, by the command's one renewing loop, until it is over.
        self.links
            .hold_job(job, &(0..spec.nodes).collect::<Vec<_>>());
        let (status, reason, reports) = wait(clients, self.links, job, spec, start, cancel);
        self.links.end_job();
        let fidelity = self.proof(before);
        for c in clients {
            let _ = c.delete_job(job);
        }
        let seconds = start.elapsed().as_secs_f64();
        let rank0 = reports
            .iter()
            .flat_map(|r| r.ranks.iter())
            .find(|r| r.rank == 0)
            .cloned();
        Ok(Outcome {
            seconds: rank0
                .as_ref()
                .map(|r| r.seconds.min(seconds))
                .unwrap_or(seconds),
            result: rank0.as_ref().and_then(|r| r.result.clone()),
            output: rank0.map(|r| r.output_tail).unwrap_or_default(),
            ..self.outcome(status, reason, fidelity)
        })
    }
}

/// Poll until done; returns (status, reason, reports). The job's lease is renewed by
/// `links` meanwhile: a node that did not renew it (or the shape) fails the run at once.
fn wait(
    clients: &[AgentClient],
    links: &LinkLease,
    job: &Name,
    spec: &JobSpec,
    start: Instant,
    cancel: &AtomicBool,
) -> (RunStatus, Option<String>, Vec<JobReport>) {
    let deadline = start + spec.time_limit.duration() + Duration::from_secs(15);
    loop {
        if cancel.load(Ordering::SeqCst) {
            return (
                RunStatus::Interrupted,
                Some("interrupted by the user".into()),
                Vec::new(),
            );
        }
        let mut failure: Option<String> = links.broken();
        let mut reports = Vec::new();
        for c in clients {
            match c.job_report(job) {
                Ok(r) => reports.push(r),
                Err(e) => {
                    failure.get_or_insert(format!("lost contact with node `{}`: {e}", c.node()));
                }
            }
        }
        if failure.is_none() {
            failure = reports
                .iter()
                .find(|r| r.state == JobState::Failed)
                .map(JobReport::failure);
        }
        if let Some(f) = failure {
            return (RunStatus::Failed, Some(f), reports);
        }
        if reports.iter().all(|r| r.state == JobState::Succeeded) {
            return (RunStatus::Ok, None, reports);
        }
        if Instant::now() > deadline {
            return (
                RunStatus::Failed,
                Some(format!(
                    "no result within the time limit of {:.0} s",
                    spec.time_limit.secs()
                )),
                reports,
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_are_valid_and_carry_the_prefix() {
        let n = job_name(Some("sw1234abcd"), "bfs").unwrap();
        assert!(n.as_str().starts_with("sw1234abcd-bfs-"), "{n}");
        assert!(job_name(None, "pmm").unwrap().as_str().starts_with("pmm-"));
        assert_eq!("failed".parse::<RunStatus>().unwrap(), RunStatus::Failed);
    }
}
