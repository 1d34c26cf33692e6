//! Starting, watching and stopping the ranks of a job on this node.
//!
//! The controller asks each node's agent to launch that node's ranks (`POST
//! /jobs/{job}/launch`). Only programs the [`ProgramPolicy`] allows run, with an
//! environment from which loader and interpreter variables are refused. Each rank runs in
//! its own process group, so killing the group leaves nothing behind. The agent keeps the
//! tail of each rank's output and the rank's self-reported result line
//! (`THROTTLE_RESULT {json}`), kills the job's other ranks when one fails or the time limit
//! passes, and kills everything on request or when the agent stops.
//!
//! Every job holds a *lease*: the controller that launched it renews it (`POST
//! /jobs/{job}/renew`) while it waits; when renewals stop for `lease_s` seconds (the
//! controller was killed, or lost the network) the job's ranks are killed and the job is
//! forgotten ([`Launcher::expired`]), so no run outlives the controller that measures it.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use throttle_proto::job::{JobReport, JobState, LaunchSpec, RankReport, RankState};
use throttle_proto::result::WorkloadResult;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use crate::launch::programs::{ProgramError, ProgramPolicy};
use crate::lease::LeaseTerm;
use throttle_proto::name::{path_inside, Name};

/// Lines of output kept per rank.
const TAIL_LINES: usize = 40;
/// Longest output line kept (longer lines are cut).
const MAX_LINE: usize = 2000;
/// Jobs an agent holds at once (running or finished but not yet deleted).
pub const MAX_JOBS: usize = 256;
/// Ranks one launch may start on this node.
pub const MAX_LOCAL_RANKS: usize = 1024;
/// Ranks running on this node at once, over all jobs.
pub const MAX_RUNNING_RANKS: usize = 4096;
/// Arguments and environment variables a launch may carry, and their sizes.
const MAX_ARGS: usize = 1024;
const MAX_ENV: usize = 256;
const MAX_ARG_BYTES: usize = 16 * 1024;

/// The environment variables a launch may set: threading and logging knobs that change
/// how much a program does at once, never what code it loads or runs. An allow-list: a
/// deny-list let through `OMPI_MCA_plm_rsh_agent` (a command Open MPI runs),
/// `SSL_CERT_FILE`, `KRB5_CONFIG` and `HOME`, and every new loader or interpreter
/// variable would be one more to think of (`OMP_TOOL_LIBRARIES` loads a library, so the
/// OpenMP variables are named one by one). A program that needs more sets them itself
/// (a wrapper the operator allows with --allow-program).
const ALLOWED_ENV: &[&str] = &[
    "OMP_NUM_THREADS",
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "OMP_SCHEDULE",
    "OMP_STACKSIZE",
    "OMP_WAIT_POLICY",
    "OMP_DYNAMIC",
    "OMP_MAX_ACTIVE_LEVELS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "RAYON_NUM_THREADS",
    "RUST_LOG",
    "RUST_BACKTRACE",
    "TZ",
    "LANG",
    "LC_ALL",
];

/// Refuse an environment variable a launch may not set, saying why.
pub fn check_env(key: &str, value: &str) -> Result<(), String> {
    let valid_key = !key.is_empty()
        && key.len() <= 128
        && !key.as_bytes()[0].is_ascii_digit()
        && key.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
    if !valid_key {
        return Err(format!(
            "environment variable name `{}` is not valid: letters, digits and `_`, not starting with a digit",
            key.escape_debug()
        ));
    }
    if key.to_ascii_uppercase().starts_with("THROTTLE_") {
        return Err(format!(
            "environment variable `{key}` cannot be set: THROTTLE_* are set by the agent"
        ));
    }
    if !ALLOWED_ENV.contains(&key) {
        return Err(format!(
            "environment variable `{key}` cannot be set through a launch: only {} may (threading and logging; a variable that changes what code a program loads or runs never)",
            ALLOWED_ENV.join(", ")
        ));
    }
    // Zone and locale names, not paths: glibc loads a file named by an absolute path.
    if ["TZ", "LANG", "LC_ALL"].contains(&key)
        && !value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.@+-:".contains(c))
    {
        return Err(format!(
            "environment variable `{key}`: a zone or locale name (letters, digits, `_.@+-:`), not a path"
        ));
    }
    if value.len() > MAX_ARG_BYTES || value.contains('\0') {
        return Err(format!(
            "environment variable `{key}`: the value is longer than {MAX_ARG_BYTES} bytes or contains NUL"
        ));
    }
    Ok(())
}

struct RankSlot {
    rank: u32,
    pid: Option<u32>,
    state: RankState,
    tail: VecDeque<String>,
    result: Option<WorkloadResult>,
    started: Instant,
    ended: Option<Instant>,
}

struct Job {
    name: Name,
    ranks: Vec<RankSlot>,
    reason: Option<String>,
    run_dir: PathBuf,
    /// Its lease: the controller renews it while it waits.
    term: LeaseTerm,
    /// Set when the job is killed (by request, a failed rank, the time limit or its
    /// lease): no rank may be started after that, even by a launch still in progress.
    closed: bool,
}

impl Job {
    fn lease_left(&self, now: Instant) -> Duration {
        self.term.left(now)
    }
}

/// The jobs running on this node.
pub struct Launcher {
    node: Name,
    policy: ProgramPolicy,
    base_run_dir: PathBuf,
    local_socket: PathBuf,
    /// The CPUs every launched rank is pinned to (`--rank-cpus`), if any.
    rank_cpus: Option<nix::sched::CpuSet>,
    /// Direct links for throttle's own ranks, if this node's sockets are kernel-paced
    /// where messages keep their time ([`Launcher::direct_links`]).
    direct: Option<DirectLinks>,
    jobs: Mutex<HashMap<Name, Arc<Mutex<Job>>>>,
    /// Numbers the run directories: a job's directory is named by this counter, never by
    /// the job's name, so no request field ever becomes a path component (and paths stay
    /// short enough for the ranks' Unix sockets).
    next_dir: std::sync::atomic::AtomicU64,
}

/// Where a node's ranks listen and register their sockets between nodes when they
/// connect directly.
#[derive(Clone, Debug)]
struct DirectLinks {
    pace_socket: String,
    address: std::net::IpAddr,
}

impl std::fmt::Debug for Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launcher")
            .field("policy", &self.policy)
            .finish()
    }
}

/// Why a launch was refused.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0}")]
    NotAllowed(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
}

impl From<ProgramError> for LaunchError {
    fn from(e: ProgramError) -> LaunchError {
        match e {
            ProgramError::NotAllowed(m) => LaunchError::NotAllowed(m),
            ProgramError::Invalid(m) => LaunchError::Invalid(m),
        }
    }
}

impl Launcher {
    /// Job run directories go next to the local socket, in `throttle-jobs-NODE/JOB`.
    pub fn new(node: &Name, policy: ProgramPolicy, local_socket: &Path) -> Launcher {
        let parent = local_socket
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let base_run_dir = path_inside(&parent, "throttle-jobs-", node, "")
            .unwrap_or_else(|| parent.join("throttle-jobs"));
        Launcher {
            node: node.clone(),
            policy,
            base_run_dir,
            local_socket: local_socket.to_path_buf(),
            rank_cpus: None,
            direct: None,
            jobs: Mutex::new(HashMap::new()),
            next_dir: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// Pin every rank launched from now on to these CPUs.
    pub fn pin_ranks(&mut self, cpus: nix::sched::CpuSet) {
        self.rank_cpus = Some(cpus);
    }

    /// Let the ranks launched from now on connect to other nodes' ranks directly: they
    /// listen at `address` (the node's own) and register each socket between nodes at the
    /// pacing socket `pace_socket`, whose agent sets its rate (`THROTTLE_NODE_ADDR`,
    /// `THROTTLE_PACE_SOCKET`; the communicator, `workloads::comm`, reads them).
    pub fn direct_links(&mut self, pace_socket: String, address: std::net::IpAddr) {
        self.direct = Some(DirectLinks {
            pace_socket,
            address,
        });
    }

    /// Whether ranks connect to each other directly (`direct_links`).
    pub fn direct(&self) -> bool {
        self.direct.is_some()
    }

    pub fn policy(&self) -> &ProgramPolicy {
        &self.policy
    }

    /// Check a launch request without starting anything: names, limits, environment,
    /// arguments, and the program itself. Returns the executable.
    pub fn check(&self, spec: &LaunchSpec) -> Result<PathBuf, LaunchError> {
        if spec.env.len() > MAX_ENV {
            return Err(LaunchError::Invalid(format!(
                "at most {MAX_ENV} environment variables"
            )));
        }
        for (key, value) in &spec.env {
            check_env(key, value).map_err(LaunchError::Invalid)?;
        }
        if spec.args.len() > MAX_ARGS
            || spec
                .args
                .iter()
                .any(|a| a.len() > MAX_ARG_BYTES || a.contains('\0'))
        {
            return Err(LaunchError::Invalid(format!(
                "at most {MAX_ARGS} arguments of at most {MAX_ARG_BYTES} bytes each, without NUL"
            )));
        }
        Ok(self.policy.resolve(&spec.program)?)
    }

    /// Start this node's ranks of `job`. Returns the ranks started here.
    pub fn launch(
        self: &Arc<Self>,
        job: &Name,
        spec: &LaunchSpec,
    ) -> Result<Vec<u32>, LaunchError> {
        let program = self.check(spec)?;
        let local = self.local_ranks(spec)?;
        let number = self
            .next_dir
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir_name = Name::parse("run directory", &format!("j{number}"))
            .map_err(|e| LaunchError::Invalid(e.to_string()))?;
        let run_dir = path_inside(&self.base_run_dir, "", &dir_name, "")
            .ok_or_else(|| LaunchError::Invalid("no run directory".into()))?;
        let entry = self.admit(job, spec, &local, &run_dir)?;
        for (slot, &rank) in local.iter().enumerate() {
            if entry.lock().unwrap_or_else(|e| e.into_inner()).closed {
                break; // killed while this launch was still starting ranks
            }
            let cmd = self.rank_command(&program, job, spec, rank, &run_dir);
            if !start_rank(&entry, slot, cmd, &program) {
                break;
            }
        }
        enforce_time_limit(entry, spec.time_limit_s.duration());
        Ok(local)
    }

    /// The ranks `spec` places on this node, at most [`MAX_LOCAL_RANKS`].
    fn local_ranks(&self, spec: &LaunchSpec) -> Result<Vec<u32>, LaunchError> {
        let local: Vec<u32> = spec
            .ranks
            .iter()
            .enumerate()
            .filter(|(_, n)| **n == self.node)
            .map(|(r, _)| r as u32)
            .collect();
        if local.len() > MAX_LOCAL_RANKS {
            return Err(LaunchError::Invalid(format!(
                "the job places {} ranks on node `{}`; at most {MAX_LOCAL_RANKS} per node",
                local.len(),
                self.node
            )));
        }
        Ok(local)
    }

    /// Enter `job` in the table with its `local` ranks running (none started yet), within
    /// the limits on running ranks and held jobs, its run directory made; a finished job
    /// of the same name is replaced. Returns the job as inserted: a DELETE may remove it
    /// from the map at once, and then marks it closed, which the launch sees (no rank
    /// starts).
    fn admit(
        &self,
        job: &Name,
        spec: &LaunchSpec,
        local: &[u32],
        run_dir: &Path,
    ) -> Result<Arc<Mutex<Job>>, LaunchError> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let running: usize = jobs
            .values()
            .map(|j| {
                let j = j.lock().unwrap_or_else(|e| e.into_inner());
                j.ranks.iter().filter(|r| !r.state.finished()).count()
            })
            .sum();
        if running + local.len() > MAX_RUNNING_RANKS {
            return Err(LaunchError::Conflict(format!(
                "{running} ranks run on this node already; at most {MAX_RUNNING_RANKS} at once"
            )));
        }
        if let Some(existing) = jobs.get(job) {
            let j = existing.lock().unwrap_or_else(|e| e.into_inner());
            if j.ranks.iter().any(|r| !r.state.finished()) {
                return Err(LaunchError::Conflict(format!(
                    "job `{job}` is already running here; DELETE /jobs/{job} first"
                )));
            }
            // The finished job this launch replaces leaves no directory behind.
            if j.run_dir.parent() == Some(self.base_run_dir.as_path()) {
                let _ = std::fs::remove_dir_all(&j.run_dir);
            }
        } else if jobs.len() >= MAX_JOBS {
            return Err(LaunchError::Conflict(format!(
                "this agent holds {MAX_JOBS} jobs already; DELETE finished ones (or wait for their leases to run out)"
            )));
        }
        crate::launch::private_dir::ensure(&self.base_run_dir)
            .and_then(|_| crate::launch::private_dir::ensure(run_dir))
            .map_err(|e| LaunchError::Invalid(e.to_string()))?;
        let slots = local
            .iter()
            .map(|&rank| RankSlot {
                rank,
                pid: None,
                state: RankState::Running,
                tail: VecDeque::new(),
                result: None,
                started: Instant::now(),
                ended: None,
            })
            .collect();
        let entry = Arc::new(Mutex::new(Job {
            name: job.clone(),
            ranks: slots,
            reason: None,
            run_dir: run_dir.to_path_buf(),
            term: LeaseTerm::new(spec.lease_s.duration(), Instant::now()),
            closed: false,
        }));
        jobs.insert(job.clone(), entry.clone());
        Ok(entry)
    }

    /// The command that starts `rank`: the program, its arguments and environment, the
    /// job's variables, output piped, in its own process group, pinned to the rank CPUs.
    fn rank_command(
        &self,
        program: &Path,
        job: &Name,
        spec: &LaunchSpec,
        rank: u32,
        run_dir: &Path,
    ) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(&spec.args)
            .envs(&spec.env)
            .env("THROTTLE_JOB", job.as_str())
            .env("THROTTLE_RANK", rank.to_string())
            .env("THROTTLE_SIZE", spec.ranks.len().to_string())
            // For the workloads' memory check: how many of them share this node.
            .env(
                "THROTTLE_NODE_RANKS",
                spec.ranks
                    .iter()
                    .filter(|n| **n == self.node)
                    .count()
                    .to_string(),
            )
            .env("THROTTLE_NODE", self.node.as_str())
            .env("THROTTLE_AGENT_SOCKET", &self.local_socket)
            .env("THROTTLE_RUN_DIR", run_dir)
            .env_remove("THROTTLE_PACE_SOCKET")
            .env_remove("THROTTLE_NODE_ADDR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if let Some(d) = &self.direct {
            cmd.env("THROTTLE_PACE_SOCKET", &d.pace_socket)
                .env("THROTTLE_NODE_ADDR", d.address.to_string());
        }
        if let Some(set) = self.rank_cpus {
            // SAFETY: sched_setaffinity is a plain system call (async-signal-safe);
            // the CPU set was built before the fork.
            unsafe {
                cmd.pre_exec(move || {
                    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)?;
                    Ok(())
                });
            }
        }
        cmd
    }
    fn job(&self, job: &Name) -> Option<Arc<Mutex<Job>>> {
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(job)
            .cloned()
    }

    /// This node's view of `job`, if it was launched here.
    pub fn report(&self, job: &Name) -> Option<JobReport> {
        let entry = self.job(job)?;
        let j = entry.lock().unwrap_or_else(|e| e.into_inner());
        let ranks: Vec<RankReport> = j
            .ranks
            .iter()
            .map(|r| RankReport {
                rank: r.rank,
                pid: r.pid,
                state: r.state.clone(),
                output_tail: r.tail.iter().cloned().collect(),
                result: r.result.clone(),
                seconds: r
                    .ended
                    .unwrap_or_else(Instant::now)
                    .duration_since(r.started)
                    .as_secs_f64(),
            })
            .collect();
        let state = JobState::of(ranks.iter().map(|r| &r.state));
        Some(JobReport {
            job: job.clone(),
            node: self.node.clone(),
            state,
            reason: j.reason.clone(),
            lease_left_s: j.lease_left(Instant::now()).as_secs_f64(),
            ranks,
        })
    }

    /// Whether `job` has ranks running here.
    pub fn is_running(&self, job: &Name) -> bool {
        self.job(job).is_some_and(|e| {
            e.lock()
                .unwrap_or_else(|e| e.into_inner())
                .ranks
                .iter()
                .any(|r| !r.state.finished())
        })
    }

    /// Every job held here, with its state.
    pub fn reports(&self) -> Vec<JobReport> {
        let names: Vec<Name> = self
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        let mut out: Vec<JobReport> = names.iter().filter_map(|n| self.report(n)).collect();
        out.sort_by(|a, b| a.job.cmp(&b.job));
        out
    }

    /// Extend the lease of `job` by its full length from now. False if it is not here.
    pub fn renew(&self, job: &Name) -> bool {
        match self.job(job) {
            Some(e) => {
                e.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .term
                    .renew(Instant::now());
                true
            }
            None => false,
        }
    }

    /// Kill and forget every job whose lease ran out; returns their names. The check and
    /// the removal happen under one lock, so a renewal or a new launch under the same name
    /// that comes in between is never killed.
    pub fn expired(&self) -> Vec<Name> {
        let now = Instant::now();
        let due: Vec<(Name, Arc<Mutex<Job>>)> = {
            let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
            let names: Vec<Name> = jobs
                .iter()
                .filter(|(_, j)| {
                    j.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .term
                        .ran_out(now)
                })
                .map(|(n, _)| n.clone())
                .collect();
            names
                .into_iter()
                .filter_map(|n| jobs.remove(&n).map(|e| (n, e)))
                .collect()
        };
        for (_, entry) in &due {
            let mut j = entry.lock().unwrap_or_else(|e| e.into_inner());
            let reason = format!(
                "lease expired: no renewal from the controller for {:.0} s",
                j.term.length().as_secs_f64()
            );
            self.close(&mut j, &reason);
        }
        due.into_iter().map(|(n, _)| n).collect()
    }

    /// Kill a removed job's ranks and remove its run directory.
    fn close(&self, j: &mut Job, reason: &str) {
        kill_all(j, reason);
        // Only ever a numbered directory inside our own base.
        if j.run_dir.parent() == Some(self.base_run_dir.as_path()) {
            let _ = std::fs::remove_dir_all(&j.run_dir);
        }
    }

    /// Kill the job's ranks and forget it. False if it was not launched here.
    pub fn remove(&self, job: &Name) -> bool {
        self.remove_with(job, "killed on request")
    }

    fn remove_with(&self, job: &Name, reason: &str) -> bool {
        let entry = self
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(job);
        match entry {
            Some(e) => {
                let mut j = e.lock().unwrap_or_else(|e| e.into_inner());
                self.close(&mut j, reason);
                true
            }
            None => false,
        }
    }

    /// Kill every job (agent shutdown).
    pub fn kill_everything(&self) {
        let names: Vec<Name> = self
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        for n in names {
            self.remove_with(&n, "the agent stopped");
        }
        let _ = std::fs::remove_dir_all(&self.base_run_dir);
    }

    pub fn running(&self) -> usize {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.values()
            .filter(|j| {
                j.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .ranks
                    .iter()
                    .any(|r| !r.state.finished())
            })
            .count()
    }
}

fn kill_group(pid: u32) {
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Kill the process groups of all running ranks, recording why; no rank starts after it.
fn kill_all(job: &mut Job, reason: &str) {
    if !job.closed {
        tracing::info!(job = %job.name, %reason, "killing the job's ranks");
    }
    job.closed = true;
    if job.reason.is_none() {
        job.reason = Some(reason.to_string());
    }
    for r in &mut job.ranks {
        if r.state.finished() {
            continue;
        }
        if let Some(pid) = r.pid {
            kill_group(pid);
        }
        r.state = RankState::Killed {
            reason: reason.to_string(),
        };
        r.ended = Some(Instant::now());
    }
}

async fn collect_lines<R: AsyncRead + Unpin>(job: Arc<Mutex<Job>>, slot: usize, stream: R) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        // A well-formed result line is kept as the rank's result; a malformed one stays
        // in the output tail, where the user sees it.
        if let Some(Ok(result)) = WorkloadResult::from_line(&line) {
            job.lock().unwrap_or_else(|e| e.into_inner()).ranks[slot].result = Some(result);
            continue;
        }
        let mut line = line;
        if line.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
        }
        let mut j = job.lock().unwrap_or_else(|e| e.into_inner());
        let r = &mut j.ranks[slot];
        if r.tail.len() == TAIL_LINES {
            r.tail.pop_front();
        }
        r.tail.push_back(line);
    }
}

/// Start one rank of `entry` (its `slot`) with `cmd`. Returns whether the launch goes on:
/// a rank that fails to start fails the job (the ranks not started yet are marked killed
/// and stay unstarted).
fn start_rank(
    entry: &Arc<Mutex<Job>>,
    slot: usize,
    cmd: tokio::process::Command,
    program: &Path,
) -> bool {
    // Forked from the agent's one long-lived spawner thread, so the rank is
    // killed when the agent dies and not when a blocking-pool thread retires.
    match crate::launch::spawner::spawn_tied_to_agent(cmd) {
        Ok(child) => {
            {
                let mut j = entry.lock().unwrap_or_else(|e| e.into_inner());
                j.ranks[slot].pid = child.id();
                if j.closed {
                    // Killed between the launch's check and the spawn: this rank
                    // was marked killed without a pid; kill its group now.
                    if let Some(pid) = child.id() {
                        kill_group(pid);
                    }
                }
            }
            tokio::spawn(watch_rank(entry.clone(), slot, child));
            true
        }
        Err(e) => {
            let mut j = entry.lock().unwrap_or_else(|e| e.into_inner());
            j.ranks[slot].state = RankState::FailedToStart {
                error: format!("cannot start {}: {e}", program.display()),
            };
            j.ranks[slot].ended = Some(Instant::now());
            kill_all(&mut j, "another rank failed to start");
            false
        }
    }
}

/// Kill the job's ranks that still run when `limit` has passed.
fn enforce_time_limit(entry: Arc<Mutex<Job>>, limit: Duration) {
    tokio::spawn(async move {
        tokio::time::sleep(limit).await;
        let mut j = entry.lock().unwrap_or_else(|e| e.into_inner());
        if j.ranks.iter().any(|r| !r.state.finished()) {
            kill_all(
                &mut j,
                &format!("time limit of {:.0} s reached", limit.as_secs_f64()),
            );
        }
    });
}

async fn watch_rank(job: Arc<Mutex<Job>>, slot: usize, mut child: tokio::process::Child) {
    let out = child
        .stdout
        .take()
        .map(|s| tokio::spawn(collect_lines(job.clone(), slot, s)));
    let err = child
        .stderr
        .take()
        .map(|s| tokio::spawn(collect_lines(job.clone(), slot, s)));
    let status = child.wait().await;
    for h in [out, err].into_iter().flatten() {
        // Output of an exited rank is complete once its pipes close; a grandchild that
        // keeps them open must not hold us forever.
        let _ = tokio::time::timeout(Duration::from_secs(2), h).await;
    }
    let mut j = job.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(pid) = j.ranks[slot].pid {
        // Leave nothing behind: the rank's own children die with its group, also when
        // the rank was marked killed before its pid was known.
        kill_group(pid);
    }
    if j.ranks[slot].state.finished() {
        return; // already killed, reason recorded
    }
    use std::os::unix::process::ExitStatusExt;
    let state = match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => RankState::Exited { code },
            (None, Some(sig)) => RankState::Signaled { signal: sig },
            _ => RankState::Exited { code: -1 },
        },
        Err(e) => RankState::Killed {
            reason: format!("lost track of the process: {e}"),
        },
    };
    let failed = !state.succeeded();
    let rank = j.ranks[slot].rank;
    tracing::info!(job = %j.name, rank, outcome = %state.describe(), "rank ended");
    j.ranks[slot].state = state;
    j.ranks[slot].ended = Some(Instant::now());
    if failed {
        kill_all(&mut j, &format!("rank {rank} failed"));
    }
}
