//! `throttle-ctl run`: one job on the cluster's first N nodes at one bandwidth.
//!
//! Sets the bandwidth on those nodes, asks each node's agent to launch its ranks (block
//! placement: ranks 0..R-1 on the first node, ...), polls until every rank finished or
//! one failed (then kills the job everywhere), and always removes the job from the agents
//! afterwards, so nothing is left running whatever happens. While it waits it renews the
//! job's lease on every node; if this process is killed outright, the agents kill the job
//! themselves when the lease runs out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use serde::Serialize;
use serde_json::{json, Value};
use throttle_agent::jobs::JobReport;

use crate::client::AgentClient;
use crate::cluster::Cluster;

/// Which program to run and with what arguments.
#[derive(Clone, Debug)]
pub enum Workload {
    Bfs {
        scale: u32,
        edge_factor: u32,
        keys: usize,
        validate: bool,
    },
    Pmm {
        size: usize,
        bcast: String,
    },
    /// Any program in the agents' allowed directory.
    Program {
        program: String,
        args: Vec<String>,
    },
}

impl Workload {
    pub fn name(&self) -> &str {
        match self {
            Workload::Bfs { .. } => "bfs",
            Workload::Pmm { .. } => "pmm",
            Workload::Program { .. } => "program",
        }
    }

    fn program_and_args(&self) -> (String, Vec<String>) {
        match self {
            Workload::Bfs {
                scale,
                edge_factor,
                keys,
                validate,
            } => {
                let mut a = vec![
                    "--scale".into(),
                    scale.to_string(),
                    "--edge-factor".into(),
                    edge_factor.to_string(),
                    "--keys".into(),
                    keys.to_string(),
                ];
                if !validate {
                    a.push("--no-validate".into());
                }
                ("throttle-bfs".into(), a)
            }
            Workload::Pmm { size, bcast } => (
                "throttle-pmm".into(),
                vec![
                    "--size".into(),
                    size.to_string(),
                    "--bcast".into(),
                    bcast.clone(),
                ],
            ),
            Workload::Program { program, args } => (program.clone(), args.clone()),
        }
    }
}

#[derive(Clone, Debug)]
pub struct RunSpec {
    pub workload: Workload,
    pub nodes: usize,
    pub ranks_per_node: usize,
    /// `None`: unlimited.
    pub bw_pct: Option<f64>,
    pub time_limit_s: f64,
    /// Seconds the agents keep the job without hearing from this controller.
    pub lease_s: f64,
    /// Prefix of the job's name, so that a sweep can find its own leftovers.
    pub job_prefix: Option<String>,
}

/// Default lease of a job, seconds: the agents kill a job this long after its controller
/// stopped renewing.
pub const DEFAULT_LEASE_S: f64 = 20.0;

/// What happened, for printing and for the results store.
#[derive(Clone, Debug, Serialize)]
pub struct RunOutcome {
    pub job: String,
    pub workload: String,
    pub nodes: usize,
    pub ranks_per_node: usize,
    pub procs: usize,
    pub bw_pct: Option<f64>,
    pub capacity_bytes_per_sec: f64,
    pub latency_us: u64,
    /// `ok` or `failed`.
    pub status: String,
    pub reason: Option<String>,
    /// Job completion time: rank 0's wall time from start to exit, as its agent measured
    /// it (the controller's launch-to-done time when rank 0 has no report).
    pub seconds: f64,
    /// The workload's own timing (kernel seconds), when it reported one.
    pub kernel_seconds: Option<f64>,
    pub harmonic_mean_teps: Option<f64>,
    /// The workload's own check: BFS validation or PMM verification.
    pub validation: Option<String>,
    /// Rank 0's result line.
    pub result: Option<Value>,
    /// Rank 0's output.
    #[serde(skip)]
    pub output: Vec<String>,
}

impl RunOutcome {
    /// A run that could not be started (a node unreachable, a launch refused).
    pub fn not_started(cluster: &Cluster, spec: &RunSpec, reason: String) -> RunOutcome {
        RunOutcome {
            job: String::new(),
            workload: spec.workload.name().to_string(),
            nodes: spec.nodes,
            ranks_per_node: spec.ranks_per_node,
            procs: spec.nodes * spec.ranks_per_node,
            bw_pct: spec.bw_pct,
            capacity_bytes_per_sec: cluster
                .file
                .capacity()
                .map(|r| r.bytes_per_sec())
                .unwrap_or(0.0),
            latency_us: 0,
            status: "failed".into(),
            reason: Some(reason),
            seconds: 0.0,
            kernel_seconds: None,
            harmonic_mean_teps: None,
            validation: None,
            result: None,
            output: Vec::new(),
        }
    }
}

fn job_name(prefix: Option<&str>, workload: &str) -> String {
    let mut b = [0u8; 3];
    let _ = getrandom::getrandom(&mut b);
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let name = format!("{workload}-{ms}-{:02x}{:02x}{:02x}", b[0], b[1], b[2]);
    match prefix {
        Some(p) => format!("{p}-{name}"),
        None => name,
    }
}

/// Run one job; `Err` only when the job could not be started at all.
pub fn run(cluster: &Cluster, spec: &RunSpec) -> Result<RunOutcome> {
    run_cancellable(cluster, spec, &AtomicBool::new(false))
}

/// Like [`run`]; when `cancel` becomes true the job is killed everywhere and the outcome
/// has status `interrupted`.
pub fn run_cancellable(
    cluster: &Cluster,
    spec: &RunSpec,
    cancel: &AtomicBool,
) -> Result<RunOutcome> {
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
    if !(spec.lease_s.is_finite() && (1.0..=86400.0).contains(&spec.lease_s)) {
        bail!("--lease must be between 1 and 86400 seconds");
    }
    let nodes = &cluster.file.nodes[..spec.nodes];
    let clients: Vec<AgentClient> = nodes.iter().map(|n| AgentClient::new(cluster, n)).collect();
    let pct = match spec.bw_pct {
        Some(p) => json!(p),
        None => json!("unlimited"),
    };
    let mut shape = None;
    for c in &clients {
        shape = Some(c.set_shape(&json!({ "pct": pct }))?);
    }
    let shape = shape.ok_or_else(|| anyhow!("no nodes"))?;
    let job = job_name(spec.job_prefix.as_deref(), spec.workload.name());
    let ranks: Vec<String> = (0..spec.nodes * spec.ranks_per_node)
        .map(|r| nodes[r / spec.ranks_per_node].name.clone())
        .collect();
    let (program, args) = spec.workload.program_and_args();
    let launch = json!({
        "program": program,
        "args": args,
        "ranks": ranks,
        "time_limit_s": spec.time_limit_s,
        "lease_s": spec.lease_s,
    });
    let start = Instant::now();
    for (k, c) in clients.iter().enumerate() {
        if let Err(e) = c.launch(&job, &launch) {
            for l in &clients[..k] {
                let _ = l.delete_job(&job);
            }
            return Err(e);
        }
    }
    let outcome = wait(&clients, &job, spec, start, cancel);
    for c in &clients {
        let _ = c.delete_job(&job);
    }
    let (status, reason, reports) = outcome;
    let seconds = start.elapsed().as_secs_f64();
    let rank0 = reports
        .iter()
        .flat_map(|r| r.ranks.iter())
        .find(|r| r.rank == 0)
        .cloned();
    let result = rank0.as_ref().and_then(|r| r.result.clone());
    let kernel_seconds = result.as_ref().and_then(|v| v["seconds"].as_f64());
    let harmonic_mean_teps = result
        .as_ref()
        .and_then(|v| v["harmonic_mean_teps"].as_f64());
    Ok(RunOutcome {
        job,
        workload: spec.workload.name().to_string(),
        nodes: spec.nodes,
        ranks_per_node: spec.ranks_per_node,
        procs: spec.nodes * spec.ranks_per_node,
        bw_pct: spec.bw_pct,
        capacity_bytes_per_sec: shape.capacity_bytes_per_sec,
        latency_us: shape.latency_us,
        status,
        reason,
        seconds: if let Some(w) = rank0.as_ref().map(|r| r.seconds) {
            w.min(seconds)
        } else {
            seconds
        },
        kernel_seconds,
        harmonic_mean_teps,
        validation: result.as_ref().and_then(|v| {
            v["validation"]
                .as_str()
                .or_else(|| v["verification"].as_str())
                .map(str::to_string)
        }),
        result,
        output: rank0.map(|r| r.output_tail).unwrap_or_default(),
    })
}

/// Poll until done; returns (status, reason, reports).
fn wait(
    clients: &[AgentClient],
    job: &str,
    spec: &RunSpec,
    start: Instant,
    cancel: &AtomicBool,
) -> (String, Option<String>, Vec<JobReport>) {
    let deadline = start + Duration::from_secs_f64(spec.time_limit_s + 15.0);
    // Renew well before the lease runs out, so one slow poll cannot lose the job.
    let renew_every = Duration::from_secs_f64(spec.lease_s / 4.0);
    let mut renewed = Instant::now();
    loop {
        if cancel.load(Ordering::SeqCst) {
            for c in clients {
                let _ = c.delete_job(job);
            }
            return (
                "interrupted".into(),
                Some("interrupted by the user".into()),
                Vec::new(),
            );
        }
        let mut reports = Vec::new();
        let mut failure: Option<String> = None;
        if renewed.elapsed() >= renew_every {
            renewed = Instant::now();
            for c in clients {
                if let Err(e) = c.renew(job) {
                    failure = Some(format!(
                        "node `{}` no longer holds the job (its lease of {:.0} s ran out, or the agent restarted): {e}",
                        c.node(),
                        spec.lease_s
                    ));
                }
            }
        }
        for c in clients {
            match c.job_report(job) {
                Ok(r) => reports.push(r),
                Err(e) => {
                    failure.get_or_insert(format!("lost contact with node `{}`: {e}", c.node()));
                }
            }
        }
        for r in &reports {
            if r.state == "failed" && failure.is_none() {
                failure = Some(describe_failure(r));
            }
        }
        if let Some(f) = failure {
            for c in clients {
                let _ = c.delete_job(job);
            }
            return ("failed".into(), Some(f), reports);
        }
        if reports.iter().all(|r| r.state == "succeeded") {
            return ("ok".into(), None, reports);
        }
        if Instant::now() > deadline {
            for c in clients {
                let _ = c.delete_job(job);
            }
            return (
                "failed".into(),
                Some(format!(
                    "no result within the time limit of {:.0} s",
                    spec.time_limit_s
                )),
                reports,
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The first failed rank, its state and the end of its output.
fn describe_failure(r: &JobReport) -> String {
    use throttle_agent::jobs::RankState;
    // Prefer the rank that failed by itself over ranks killed because of it.
    let failed = r
        .ranks
        .iter()
        .find(|k| {
            matches!(
                k.state,
                RankState::Exited { .. }
                    | RankState::Signaled { .. }
                    | RankState::FailedToStart { .. }
            ) && !k.state.succeeded()
        })
        .or_else(|| r.ranks.iter().find(|k| !k.state.succeeded()));
    match failed {
        Some(k) => {
            let how = match &k.state {
                RankState::Exited { code } => format!("exited with code {code}"),
                RankState::Signaled { signal } => format!("was killed by signal {signal}"),
                RankState::Killed { reason } => format!("was killed: {reason}"),
                RankState::FailedToStart { error } => format!("failed to start: {error}"),
                RankState::Running => "is still running".into(),
            };
            let tail: Vec<&String> = k
                .output_tail
                .iter()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let tail = tail
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" | ");
            format!(
                "rank {} on node `{}` {how}{}",
                k.rank,
                r.node,
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(": {tail}")
                }
            )
        }
        None => r.reason.clone().unwrap_or_else(|| "the job failed".into()),
    }
}
