//! Starting, watching and stopping the ranks of a job on this node.
//!
//! The controller asks each node's agent to launch that node's ranks (`POST
//! /jobs/{job}/launch`). Only programs inside the allowed directory run (by default the
//! directory of the agent binary, where the workloads are installed). Each rank runs in its
//! own process group, so killing the group leaves nothing behind. The agent keeps the tail
//! of each rank's output and the rank's self-reported result line
//! (`THROTTLE_RESULT {json}`), kills the job's other ranks when one fails or the time limit
//! passes, and kills everything on request or when the agent stops.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Lines of output kept per rank.
const TAIL_LINES: usize = 40;
/// Longest output line kept (longer lines are cut).
const MAX_LINE: usize = 2000;
/// Prefix of the line a rank prints with its timings.
pub const RESULT_PREFIX: &str = "THROTTLE_RESULT ";

/// What the controller asks for.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchSpec {
    /// Program name (looked up in the allowed directory) or path (must be inside it).
    pub program: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Node of every rank (index = rank).
    pub ranks: Vec<String>,
    /// Seconds before the job is killed.
    #[serde(default = "default_limit")]
    pub time_limit_s: f64,
}

fn default_limit() -> f64 {
    600.0
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
}

/// One rank as reported by the API.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RankReport {
    pub rank: u32,
    pub pid: Option<u32>,
    #[serde(flatten)]
    pub state: RankState,
    pub output_tail: Vec<String>,
    pub result: Option<serde_json::Value>,
    pub seconds: f64,
}

/// This node's part of a job.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobReport {
    pub job: String,
    pub node: String,
    /// `running`, `succeeded` or `failed`.
    pub state: String,
    pub reason: Option<String>,
    pub ranks: Vec<RankReport>,
}

struct RankSlot {
    rank: u32,
    pid: Option<u32>,
    state: RankState,
    tail: VecDeque<String>,
    result: Option<serde_json::Value>,
    started: Instant,
    ended: Option<Instant>,
}

struct Job {
    ranks: Vec<RankSlot>,
    reason: Option<String>,
    run_dir: PathBuf,
}

/// The jobs running on this node.
pub struct Launcher {
    node: String,
    allowed_dir: PathBuf,
    base_run_dir: PathBuf,
    local_socket: PathBuf,
    jobs: Mutex<HashMap<String, Arc<Mutex<Job>>>>,
}

impl std::fmt::Debug for Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launcher")
            .field("allowed_dir", &self.allowed_dir)
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

impl Launcher {
    /// `allowed_dir` must exist; it is canonicalized so symlinks cannot escape it.
    pub fn new(node: &str, allowed_dir: &Path, local_socket: &Path) -> std::io::Result<Launcher> {
        let allowed_dir = allowed_dir.canonicalize()?;
        let base_run_dir = local_socket
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir)
            .join(format!("throttle-jobs-{node}"));
        Ok(Launcher {
            node: node.to_string(),
            allowed_dir,
            base_run_dir,
            local_socket: local_socket.to_path_buf(),
            jobs: Mutex::new(HashMap::new()),
        })
    }

    pub fn allowed_dir(&self) -> &Path {
        &self.allowed_dir
    }

    /// The executable for `program`, if it is inside the allowed directory.
    pub fn resolve(&self, program: &str) -> Result<PathBuf, LaunchError> {
        if program.is_empty() {
            return Err(LaunchError::Invalid("the program name is empty".into()));
        }
        let candidate = if program.contains('/') {
            PathBuf::from(program)
        } else {
            self.allowed_dir.join(program)
        };
        let real = candidate.canonicalize().map_err(|e| {
            LaunchError::NotAllowed(format!(
                "program `{program}` is not available in {} ({e})",
                self.allowed_dir.display()
            ))
        })?;
        if !real.starts_with(&self.allowed_dir) {
            return Err(LaunchError::NotAllowed(format!(
                "program {} is outside the allowed directory {}; install it there or start the agent with --allow-dir",
                real.display(),
                self.allowed_dir.display()
            )));
        }
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(&real)
            .map_err(|e| LaunchError::NotAllowed(format!("{}: {e}", real.display())))?;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return Err(LaunchError::NotAllowed(format!(
                "{} is not an executable file",
                real.display()
            )));
        }
        Ok(real)
    }

    /// Start this node's ranks of `job`. Returns the ranks started here.
    pub fn launch(self: &Arc<Self>, job: &str, spec: &LaunchSpec) -> Result<Vec<u32>, LaunchError> {
        if job.is_empty()
            || job.len() > 128
            || !job
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(LaunchError::Invalid(
                "job names must be 1..128 characters of letters, digits, `-`, `_`, `.`".into(),
            ));
        }
        if !(spec.time_limit_s.is_finite()
            && spec.time_limit_s > 0.0
            && spec.time_limit_s <= 7.0 * 86400.0)
        {
            return Err(LaunchError::Invalid(
                "time_limit_s must be between 0 and one week".into(),
            ));
        }
        for key in spec.env.keys() {
            if key.is_empty() || key.contains('=') || key.starts_with("THROTTLE_") {
                return Err(LaunchError::Invalid(format!(
                    "environment variable `{key}` cannot be set (THROTTLE_* are set by the agent)"
                )));
            }
        }
        let program = self.resolve(&spec.program)?;
        let local: Vec<u32> = spec
            .ranks
            .iter()
            .enumerate()
            .filter(|(_, n)| **n == self.node)
            .map(|(r, _)| r as u32)
            .collect();
        let run_dir = self.base_run_dir.join(job);
        {
            let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(existing) = jobs.get(job) {
                let j = existing.lock().unwrap_or_else(|e| e.into_inner());
                if j.ranks.iter().any(|r| !r.state.finished()) {
                    return Err(LaunchError::Conflict(format!(
                        "job `{job}` is already running here; DELETE /jobs/{job} first"
                    )));
                }
            }
            std::fs::create_dir_all(&run_dir).map_err(|e| {
                LaunchError::Invalid(format!("cannot create {}: {e}", run_dir.display()))
            })?;
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
            jobs.insert(
                job.to_string(),
                Arc::new(Mutex::new(Job {
                    ranks: slots,
                    reason: None,
                    run_dir: run_dir.clone(),
                })),
            );
        }
        let entry = self
            .job(job)
            .ok_or_else(|| LaunchError::Invalid("job vanished".into()))?;
        for (slot, &rank) in local.iter().enumerate() {
            let mut cmd = tokio::process::Command::new(&program);
            cmd.args(&spec.args)
                .envs(&spec.env)
                .env("THROTTLE_JOB", job)
                .env("THROTTLE_RANK", rank.to_string())
                .env("THROTTLE_SIZE", spec.ranks.len().to_string())
                .env("THROTTLE_NODE", &self.node)
                .env("THROTTLE_AGENT_SOCKET", &self.local_socket)
                .env("THROTTLE_RUN_DIR", &run_dir)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .process_group(0);
            // SAFETY: prctl is async-signal-safe; it only asks the kernel to SIGKILL this
            // rank if the agent dies (even by SIGKILL), so no rank outlives its agent.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            match cmd.spawn() {
                Ok(child) => {
                    {
                        let mut j = entry.lock().unwrap_or_else(|e| e.into_inner());
                        j.ranks[slot].pid = child.id();
                    }
                    tokio::spawn(watch_rank(entry.clone(), slot, child));
                }
                Err(e) => {
                    let mut j = entry.lock().unwrap_or_else(|e| e.into_inner());
                    j.ranks[slot].state = RankState::FailedToStart {
                        error: format!("cannot start {}: {e}", program.display()),
                    };
                    j.ranks[slot].ended = Some(Instant::now());
                    // The ranks not started yet are marked killed and stay unstarted.
                    kill_all(&mut j, "another rank failed to start");
                    break;
                }
            }
        }
        let limit = Duration::from_secs_f64(spec.time_limit_s);
        let watched = entry.clone();
        tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            let mut j = watched.lock().unwrap_or_else(|e| e.into_inner());
            if j.ranks.iter().any(|r| !r.state.finished()) {
                kill_all(
                    &mut j,
                    &format!("time limit of {:.0} s reached", limit.as_secs_f64()),
                );
            }
        });
        Ok(local)
    }

    fn job(&self, job: &str) -> Option<Arc<Mutex<Job>>> {
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(job)
            .cloned()
    }

    /// This node's view of `job`, if it was launched here.
    pub fn report(&self, job: &str) -> Option<JobReport> {
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
        let state = if ranks.iter().any(|r| !r.state.finished()) {
            "running"
        } else if ranks.iter().all(|r| r.state.succeeded()) {
            "succeeded"
        } else {
            "failed"
        };
        Some(JobReport {
            job: job.to_string(),
            node: self.node.clone(),
            state: state.to_string(),
            reason: j.reason.clone(),
            ranks,
        })
    }

    /// Kill the job's ranks and forget it. False if it was not launched here.
    pub fn remove(&self, job: &str) -> bool {
        let entry = self
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(job);
        match entry {
            Some(e) => {
                let mut j = e.lock().unwrap_or_else(|e| e.into_inner());
                kill_all(&mut j, "killed on request");
                let _ = std::fs::remove_dir_all(&j.run_dir);
                true
            }
            None => false,
        }
    }

    /// Kill every job (agent shutdown).
    pub fn kill_everything(&self) {
        let names: Vec<String> = self
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        for n in names {
            self.remove(&n);
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

/// Kill the process groups of all running ranks, recording why.
fn kill_all(job: &mut Job, reason: &str) {
    if job.reason.is_none() {
        job.reason = Some(reason.to_string());
    }
    for r in &mut job.ranks {
        if r.state.finished() {
            continue;
        }
        if let Some(pid) = r.pid {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
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
        if let Some(json) = line.strip_prefix(RESULT_PREFIX) {
            if let Ok(v) = serde_json::from_str(json) {
                job.lock().unwrap_or_else(|e| e.into_inner()).ranks[slot].result = Some(v);
                continue;
            }
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
    j.ranks[slot].state = state;
    j.ranks[slot].ended = Some(Instant::now());
    if let Some(pid) = j.ranks[slot].pid {
        // Leave nothing behind: the rank's own children die with its group.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    if failed {
        kill_all(&mut j, &format!("rank {rank} failed"));
    }
}
