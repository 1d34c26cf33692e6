//! `throttle-ctl sweep`: stepped bandwidths x node counts x repeats, stored run by run.
//!
//! The spec (TOML) names the workload and its options, the node counts, ranks per node,
//! bandwidth steps (numbers and ranges such as `40:20:-2`), repeats, a time limit per run,
//! retries, and whether to randomise the order (default yes, seeded, so reruns are
//! reproducible). Every point has a key; a point with a successful row in the store is
//! skipped, so re-running the same spec resumes. A failed run is stored with its reason and
//! retried up to `retries` more times. Ctrl-C kills the running job and stops; everything
//! stored stays.
//!
//! Noise control: before the first run of each node count a warm-up run at 100% is made
//! and not stored (`warmup`); every run is preceded by a settle pause (`settle`, seconds)
//! over which the machine's CPU load is measured and stored with the run, with the bytes
//! the run's nodes moved through their agents. `repeats = "auto"` runs 3 repeats of every
//! point, then more of the points whose median is not yet known within `precision` (the
//! relative half-width of its 90% interval), up to `max_repeats` (twice that at the 100%
//! baseline, which every CTI of its size is measured against).
//!
//! A node that cannot be reached makes the point fail with a reason naming the node, and
//! the sweep goes on (or stops with that message, with [`SweepOptions::fail_fast`]).
//! Every job of a sweep is named with a prefix derived from the results database and the
//! series ([`job_prefix`]), so a sweep that resumes after its controller was killed first
//! removes what that controller left on the agents.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use throttle_proto::emulation;
use throttle_proto::workload::{
    BfsOptions, CommandOptions, MwOptions, Options, PmmOptions, ProgramOptions,
};
use throttle_proto::Pct;

use crate::agent_client::AgentClient;
use crate::analysis::stats::Rng;
use crate::cluster::Cluster;
use crate::job::{self, JobSpec, Outcome, RunStatus};
use crate::load;
use crate::store::{RunRow, Store};
use crate::workload::Workload;

/// How a sweep behaves beyond its spec.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// Prefix of every job name of this sweep ([`job_prefix`]).
    pub job_prefix: String,
    /// Lease of each job on the agents, seconds.
    pub lease_s: f64,
    /// Stop at the first run that fails because a node could not be reached or refused
    /// to start it, instead of storing the failure and going on.
    pub fail_fast: bool,
}

/// The job-name prefix of a sweep: the same for the same results database and series,
/// so a resumed sweep recognises the jobs an earlier, killed run of it left behind.
pub fn job_prefix(db: &Path, series: &str) -> String {
    let db = db.canonicalize().unwrap_or_else(|_| db.to_path_buf());
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in db
        .to_string_lossy()
        .bytes()
        .chain([0])
        .chain(series.bytes())
    {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("sw{:08x}", h as u32)
}

/// Remove, from every reachable node, the jobs whose names start with `prefix` (their
/// ranks are killed). Returns how many were removed.
pub fn remove_leftovers(cluster: &Cluster, prefix: &str) -> usize {
    let mine = format!("{prefix}-");
    let mut removed = 0;
    for n in &cluster.file.nodes {
        let c = AgentClient::new(cluster, n);
        let Ok(jobs) = c.jobs() else { continue };
        for job in jobs.names().iter().filter(|j| j.starts_with(&mine)) {
            if c.delete_job(job).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// The sweep specification file.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// bfs, pmm, mw, program, or command (a command of the user's run on this host).
    pub workload: String,
    pub nodes: Vec<usize>,
    #[serde(default = "one")]
    pub ranks_per_node: usize,
    /// Steps: numbers, "unlimited", or ranges "start:stop:step" (inclusive).
    pub bandwidths: Vec<toml::Value>,
    /// A number, or "auto" (see the module documentation).
    #[serde(default)]
    pub repeats: Repeats,
    /// With `repeats = "auto"`: the most repeats of a throttled point (the 100% baseline
    /// gets twice as many).
    #[serde(default = "ten")]
    pub max_repeats: u32,
    /// With `repeats = "auto"`: repeat until the 90% interval of the point's median is
    /// within this share of it (0.02: +-2%).
    #[serde(default = "two_percent")]
    pub precision: f64,
    /// One unstored run at 100% before the first run of each node count.
    #[serde(default = "yes")]
    pub warmup: bool,
    /// Seconds of pause before each run (the machine's load is measured over it).
    #[serde(default = "one_second")]
    pub settle: f64,
    /// Seconds per run before it is killed.
    #[serde(default = "limit")]
    pub time_limit: f64,
    #[serde(default = "yes")]
    pub randomize: bool,
    #[serde(default = "two")]
    pub retries: u32,
    #[serde(default)]
    pub seed: u64,
    /// The workload's section: the one `workload` names, no other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfs: Option<BfsOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmm: Option<PmmOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mw: Option<MwOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<ProgramOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandOptions>,
}

impl SweepSpec {
    /// A spec of `workload` over `nodes` and `bandwidths` (steps as in the file), every
    /// other key at its default.
    pub fn new(workload: Options, nodes: Vec<usize>, bandwidths: Vec<toml::Value>) -> SweepSpec {
        let mut spec = SweepSpec {
            workload: workload.name().to_string(),
            nodes,
            ranks_per_node: one(),
            bandwidths,
            repeats: Repeats::default(),
            max_repeats: ten(),
            precision: two_percent(),
            warmup: yes(),
            settle: one_second(),
            time_limit: limit(),
            randomize: yes(),
            retries: two(),
            seed: 0,
            bfs: None,
            pmm: None,
            mw: None,
            program: None,
            command: None,
        };
        match workload {
            Options::Bfs(o) => spec.bfs = Some(o),
            Options::Pmm(o) => spec.pmm = Some(o),
            Options::Mw(o) => spec.mw = Some(o),
            Options::Program(o) => spec.program = Some(o),
            Options::Command(o) => spec.command = Some(o),
            // Not swept: [`SweepSpec::options`] says so.
            Options::LogGps(_) => {}
        }
        spec
    }

    /// The options of the workload `workload` names: its section, or its defaults where
    /// it has some. A section for another workload is an error (it would be ignored).
    pub fn options(&self) -> Result<Options> {
        let sections = [
            ("bfs", self.bfs.is_some()),
            ("pmm", self.pmm.is_some()),
            ("mw", self.mw.is_some()),
            ("program", self.program.is_some()),
            ("command", self.command.is_some()),
        ];
        if let Some((other, _)) = sections
            .iter()
            .find(|(name, present)| *present && *name != self.workload)
        {
            bail!(
                "the spec has a [{other}] section but `workload = \"{}\"`: remove it, or set `workload = \"{other}\"`",
                self.workload.escape_debug()
            );
        }
        Ok(match self.workload.as_str() {
            "bfs" => Options::Bfs(self.bfs.clone().unwrap_or_else(|| BfsOptions {
                // A sweep measures; `run` checks the program.
                validate: false,
                ..BfsOptions::default()
            })),
            "pmm" => Options::Pmm(self.pmm.clone().unwrap_or_default()),
            "mw" => Options::Mw(self.mw.clone().unwrap_or_default()),
            "program" => Options::Program(self.program.clone().ok_or_else(|| {
                anyhow!("workload = \"program\" needs a [program] table with name")
            })?),
            "command" => Options::Command(self.command.clone().ok_or_else(|| {
                anyhow!("workload = \"command\" needs a [command] table with run = \"...\"")
            })?),
            "loggps" => bail!("loggps is not swept: `throttle-ctl model loggps` measures it"),
            other => bail!("{}", throttle_proto::workload::unknown(other)),
        })
    }
}

fn one() -> usize {
    1
}
fn two() -> u32 {
    2
}
fn ten() -> u32 {
    10
}
fn two_percent() -> f64 {
    0.02
}
fn one_second() -> f64 {
    1.0
}

/// How many runs per point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repeats {
    Fixed(u32),
    /// [`AUTO_FIRST`] each, then more where the median is not yet precise.
    Auto,
}

/// Repeats every point gets first under `repeats = "auto"`.
pub const AUTO_FIRST: u32 = 3;

impl Default for Repeats {
    fn default() -> Self {
        Repeats::Fixed(3)
    }
}

impl Repeats {
    /// The repeats planned up front.
    pub fn first(self) -> u32 {
        match self {
            Repeats::Fixed(n) => n,
            Repeats::Auto => AUTO_FIRST,
        }
    }
}

impl Serialize for Repeats {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Repeats::Fixed(n) => s.serialize_u32(*n),
            Repeats::Auto => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for Repeats {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match toml::Value::deserialize(d)? {
            toml::Value::Integer(n) if (1..=10_000).contains(&n) => Ok(Repeats::Fixed(n as u32)),
            toml::Value::String(s) if s == "auto" => Ok(Repeats::Auto),
            other => Err(serde::de::Error::custom(format!(
                "`repeats` must be a number from 1 to 10000 or \"auto\", not {other}"
            ))),
        }
    }
}

/// The relative half-width of the 90% interval of the median of `times` (normal
/// approximation: 1.645 x 1.2533 x CV / sqrt(n)); infinite for fewer than 2.
pub fn median_precision(times: &[f64]) -> f64 {
    if times.len() < 2 {
        return f64::INFINITY;
    }
    1.644_853_6 * 1.253_314_1 * crate::analysis::stats::cv(times) / (times.len() as f64).sqrt()
}
fn limit() -> f64 {
    600.0
}
fn yes() -> bool {
    true
}

/// Expand the bandwidth steps: `None` is unlimited.
pub fn expand_bandwidths(steps: &[toml::Value]) -> Result<Vec<Pct>> {
    let mut out: Vec<Option<f64>> = Vec::new();
    let check = |v: f64, what: &str| -> Result<f64> {
        Pct::new(v)
            .map(|_| v)
            .map_err(|_| anyhow!("bandwidth {what}: {v} is not a percentage from 0.01 to 100"))
    };
    for s in steps {
        match s {
            toml::Value::Integer(i) => out.push(Some(check(*i as f64, "step")?)),
            toml::Value::Float(f) => out.push(Some(check(*f, "step")?)),
            toml::Value::String(t) if t == "unlimited" => out.push(None),
            toml::Value::String(t) => {
                let parts: Vec<&str> = t.split(':').collect();
                if parts.len() == 1 {
                    let v: f64 = t.parse().map_err(|_| {
                        anyhow!("bandwidth `{t}` is not a number, `unlimited` or START:STOP:STEP")
                    })?;
                    out.push(Some(check(v, "step")?));
                    continue;
                }
                let nums: Vec<f64> = parts
                    .iter()
                    .map(|p| p.parse::<f64>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| {
                        anyhow!("bandwidth range `{t}` must be START:STOP:STEP, e.g. 40:20:-2")
                    })?;
                if nums.len() != 3 {
                    bail!("bandwidth range `{t}` must be START:STOP:STEP, e.g. 40:20:-2");
                }
                let (a, b, step) = (
                    check(nums[0], "range start")?,
                    check(nums[1], "range stop")?,
                    nums[2],
                );
                if step == 0.0 || (b - a) * step < 0.0 {
                    bail!("bandwidth range `{t}`: the step {step} does not lead from {a} to {b}");
                }
                let n = ((b - a) / step).floor() as usize;
                if n > 1000 {
                    bail!("bandwidth range `{t}` has more than 1000 steps");
                }
                for k in 0..=n {
                    out.push(Some(((a + k as f64 * step) * 1e6).round() / 1e6));
                }
            }
            other => {
                bail!("bandwidth step `{other}` is not a number, `unlimited` or a range string")
            }
        }
    }
    let mut seen = Vec::new();
    out.retain(|v| {
        let key = v.map(|x| (x * 1e6) as i64);
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
    if out.is_empty() {
        bail!("the sweep has no bandwidth steps");
    }
    out.into_iter()
        .map(|v| match v {
            Some(p) => Pct::new(p).map_err(|e| anyhow!("{e}")),
            None => Ok(Pct::UNLIMITED),
        })
        .collect()
}

/// One point of the sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPoint {
    pub nodes: usize,
    pub bw: Pct,
    pub repeat: u32,
    /// Identifies the point across runs of the sweep (series, nodes, ranks per node,
    /// bandwidth, repeat), so a resumed sweep knows what is stored.
    pub key: String,
}

impl SweepPoint {
    pub fn new(series: &str, nodes: usize, ranks_per_node: usize, bw: Pct, repeat: u32) -> Self {
        SweepPoint {
            nodes,
            bw,
            repeat,
            key: format!(
                "{}rep={repeat}",
                Self::group(series, nodes, ranks_per_node, bw)
            ),
        }
    }

    /// The key of every repeat of this (series, nodes, bandwidth), up to the repeat.
    pub fn group(series: &str, nodes: usize, ranks_per_node: usize, bw: Pct) -> String {
        let bw_text = bw
            .percent()
            .map(|b| b.to_string())
            .unwrap_or_else(|| "unlimited".into());
        format!("{series}|nodes={nodes}|rpn={ranks_per_node}|bw={bw_text}|")
    }
}

/// A parsed, checked sweep.
pub struct Sweep {
    pub spec: SweepSpec,
    pub workload: Workload,
    pub series: String,
    pub options: serde_json::Value,
    pub points: Vec<SweepPoint>,
}

impl Sweep {
    pub fn load(path: &Path) -> Result<Sweep> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the sweep spec {}", path.display()))?;
        let spec: SweepSpec = toml::from_str(&text)
            .map_err(|e| anyhow!("the sweep spec {} is not valid: {e}", path.display()))?;
        Sweep::new(spec)
    }

    pub fn new(spec: SweepSpec) -> Result<Sweep> {
        let workload = Workload::new(spec.options()?)?;
        let options = workload.options().to_json();
        if spec.nodes.is_empty() || spec.nodes.contains(&0) {
            bail!("`nodes` must list node counts >= 1");
        }
        if spec.repeats == Repeats::Auto {
            if spec.max_repeats < AUTO_FIRST {
                bail!("`max_repeats` must be at least {AUTO_FIRST} (the repeats every point gets first)");
            }
            if !(spec.precision.is_finite() && spec.precision > 0.0 && spec.precision < 1.0) {
                bail!("`precision` must be a share between 0 and 1 (0.02 for +-2%)");
            }
        }
        if !(spec.settle.is_finite() && (0.0..=600.0).contains(&spec.settle)) {
            bail!("`settle` must be between 0 and 600 seconds");
        }
        if !(spec.time_limit.is_finite() && spec.time_limit > 0.0) {
            bail!("`time_limit` must be a positive number of seconds");
        }
        for &n in &spec.nodes {
            workload
                .check_procs(n * spec.ranks_per_node)
                .map_err(|e| anyhow!("at {n} node(s) x {} rank(s): {e}", spec.ranks_per_node))?;
        }
        if let Options::Pmm(PmmOptions {
            size,
            emulate_gflops: Some(g),
            ..
        }) = workload.options()
        {
            for &n in &spec.nodes {
                let s = emulated_pmm_seconds(*size, n * spec.ranks_per_node, *g);
                if s > spec.time_limit {
                    bail!(
                        "at {n} node(s) the emulated compute alone takes {s:.1} s per run (size {size} at {g} GFLOP/s), more than `time_limit` = {} s: raise `emulate_gflops` or `time_limit`, or lower `size`",
                        spec.time_limit
                    );
                }
            }
        }
        let bws = expand_bandwidths(&spec.bandwidths)?;
        let series = format!(
            "{} {}",
            workload.name(),
            options
                .as_object()
                .map(|m| m
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" "))
                .unwrap_or_default()
        );
        let mut points = Vec::new();
        for &n in &spec.nodes {
            for bw in &bws {
                for r in 0..spec.repeats.first() {
                    points.push(SweepPoint::new(&series, n, spec.ranks_per_node, *bw, r));
                }
            }
        }
        if spec.randomize {
            let mut rng = Rng::new(spec.seed ^ 0x005E_ED0F_5EE9);
            for i in (1..points.len()).rev() {
                let j = rng.below(i + 1);
                points.swap(i, j);
            }
        }
        Ok(Sweep {
            spec,
            workload,
            series,
            options,
            points,
        })
    }
}

/// How a sweep ended.
#[derive(Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum SweepEnd {
    Complete {
        ran: usize,
        skipped: usize,
        gave_up: usize,
    },
    Interrupted {
        ran: usize,
    },
}

/// What a running sweep tells its caller (which shows it as a progress bar, lines, or
/// JSON).
#[derive(Debug)]
pub enum SweepEvent<'a> {
    /// Jobs an earlier, killed run of this sweep left on the agents were removed.
    LeftoversRemoved(usize),
    /// Some points were stored already and are skipped.
    Resuming { stored: usize, total: usize },
    /// A run is about to start (`index` of `todo`, from 0).
    Starting {
        index: usize,
        todo: usize,
        point: &'a SweepPoint,
    },
    /// A run ended and was stored.
    Finished {
        index: usize,
        todo: usize,
        point: &'a SweepPoint,
        outcome: &'a Outcome,
        /// Estimated seconds for the rest of the sweep.
        eta_s: f64,
    },
    /// A point failed more often than `retries` allows and is given up.
    GaveUp {
        point: &'a SweepPoint,
        attempts: u32,
    },
    /// The unstored warm-up run of a node count is starting.
    WarmingUp { nodes: usize },
    /// The machine was busy (a share of its CPUs, 0..1) just before this run.
    Busy { point: &'a SweepPoint, busy: f64 },
    /// `repeats = "auto"`: another round of repeats for points not yet precise enough.
    MoreRepeats { round: usize, points: usize },
}

pub fn now_utc() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

impl Sweep {
    /// Run the sweep against `cluster`, storing every run into `store`; `on_event` hears
    /// of every step.
    pub fn execute(
        &self,
        cluster: &Cluster,
        store: &Store,
        options: &SweepOptions,
        cancel: &AtomicBool,
        mut on_event: impl FnMut(SweepEvent<'_>),
    ) -> Result<SweepEnd> {
        if let Some(&max) = self.spec.nodes.iter().max() {
            if max > cluster.file.nodes.len() {
                bail!(
                    "the sweep needs {max} nodes, the cluster file lists {} ({})",
                    cluster.file.nodes.len(),
                    cluster.node_names().join(", ")
                );
            }
        }
        let leftovers = remove_leftovers(cluster, &options.job_prefix);
        if leftovers > 0 {
            on_event(SweepEvent::LeftoversRemoved(leftovers));
        }
        let done = store.done_points()?;
        let todo: Vec<&SweepPoint> = self
            .points
            .iter()
            .filter(|p| !done.contains(&p.key))
            .collect();
        let skipped = self.points.len() - todo.len();
        if skipped > 0 {
            on_event(SweepEvent::Resuming {
                stored: skipped,
                total: self.points.len(),
            });
        }
        let mut runner = Runner {
            sweep: self,
            cluster,
            store,
            options,
            cancel,
            host: std::fs::read_to_string("/etc/hostname")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            failed: store.failed_attempts()?,
            warmed: HashSet::new(),
            started: Instant::now(),
            ran: 0,
            gave_up: 0,
        };
        for (i, p) in todo.iter().enumerate() {
            if !runner.point(p, i, todo.len(), &mut on_event)? {
                return Ok(SweepEnd::Interrupted { ran: runner.ran });
            }
        }
        if self.spec.repeats == Repeats::Auto {
            let mut round = 0;
            loop {
                let more = self.more_repeats(store, &runner.failed)?;
                if more.is_empty() {
                    break;
                }
                round += 1;
                on_event(SweepEvent::MoreRepeats {
                    round,
                    points: more.len(),
                });
                for (i, p) in more.iter().enumerate() {
                    if !runner.point(p, i, more.len(), &mut on_event)? {
                        return Ok(SweepEnd::Interrupted { ran: runner.ran });
                    }
                }
            }
        }
        Ok(SweepEnd::Complete {
            ran: runner.ran,
            skipped,
            gave_up: runner.gave_up,
        })
    }

    /// Under `repeats = "auto"`: the next repeat of every point whose median is not yet
    /// within `precision` and that has repeats left, in a seeded shuffled order.
    pub fn more_repeats(
        &self,
        store: &Store,
        failed: &HashMap<String, u32>,
    ) -> Result<Vec<SweepPoint>> {
        let rows = store.rows()?;
        let mut groups: Vec<(usize, Pct)> = Vec::new();
        for p in &self.points {
            if !groups.contains(&(p.nodes, p.bw)) {
                groups.push((p.nodes, p.bw));
            }
        }
        let mut more = Vec::new();
        for (nodes, bw) in groups {
            let prefix = SweepPoint::group(&self.series, nodes, self.spec.ranks_per_node, bw);
            let mine: Vec<_> = rows
                .iter()
                .filter(|r| r.point_key.starts_with(&prefix))
                .collect();
            let times: Vec<f64> = mine
                .iter()
                .filter(|r| r.status == RunStatus::Ok && r.flag.is_none())
                .filter_map(|r| r.kernel_seconds.or(r.seconds))
                .collect();
            let max = if bw == Pct::FULL {
                2 * self.spec.max_repeats
            } else {
                self.spec.max_repeats
            };
            if times.len() as u32 >= max || median_precision(&times) <= self.spec.precision {
                continue;
            }
            // A repeat of this point that was given up ends its extra repeats: another one
            // would most likely fail the same way, round after round.
            let given_up = failed
                .iter()
                .any(|(k, &n)| k.starts_with(&prefix) && n > self.spec.retries);
            if given_up {
                continue;
            }
            let next = mine
                .iter()
                .filter_map(|r| r.point_key.rsplit("rep=").next()?.parse::<u32>().ok())
                .max()
                .map_or(0, |m| m + 1);
            let p = SweepPoint::new(&self.series, nodes, self.spec.ranks_per_node, bw, next);
            if failed.get(&p.key).copied().unwrap_or(0) > self.spec.retries {
                continue;
            }
            more.push(p);
        }
        if self.spec.randomize {
            let mut rng = Rng::new(self.spec.seed ^ 0x000A_0702 ^ more.len() as u64);
            for i in (1..more.len()).rev() {
                more.swap(i, rng.below(i + 1));
            }
        }
        Ok(more)
    }
}

/// What one invocation of a sweep carries from run to run.
struct Runner<'a> {
    sweep: &'a Sweep,
    cluster: &'a Cluster,
    store: &'a Store,
    options: &'a SweepOptions,
    cancel: &'a AtomicBool,
    host: String,
    failed: HashMap<String, u32>,
    /// Node counts that had their warm-up run in this invocation.
    warmed: HashSet<usize>,
    started: Instant,
    ran: usize,
    gave_up: usize,
}

impl Runner<'_> {
    fn job(&self, nodes: usize, bw: Pct) -> JobSpec {
        JobSpec {
            workload: self.sweep.workload.clone(),
            nodes,
            ranks_per_node: self.sweep.spec.ranks_per_node,
            bw,
            time_limit_s: self.sweep.spec.time_limit,
            lease_s: self.options.lease_s,
            job_prefix: Some(self.options.job_prefix.clone()),
        }
    }

    /// Run `p` until it succeeds or its retries are spent, storing every attempt;
    /// `false` when interrupted.
    fn point(
        &mut self,
        p: &SweepPoint,
        index: usize,
        todo: usize,
        on_event: &mut dyn FnMut(SweepEvent<'_>),
    ) -> Result<bool> {
        let spec = &self.sweep.spec;
        if spec.warmup && self.warmed.insert(p.nodes) {
            if self.cancel.load(Ordering::SeqCst) {
                return Ok(false);
            }
            on_event(SweepEvent::WarmingUp { nodes: p.nodes });
            // Not stored: whatever it measured, or however it failed, the runs after it
            // say the same again.
            if let Ok(o) = job::execute(self.cluster, &self.job(p.nodes, Pct::FULL), self.cancel) {
                if o.status == RunStatus::Interrupted {
                    return Ok(false);
                }
            }
        }
        loop {
            let attempts = self.failed.get(&p.key).copied().unwrap_or(0);
            if attempts > spec.retries {
                self.gave_up += 1;
                on_event(SweepEvent::GaveUp { point: p, attempts });
                return Ok(true);
            }
            if self.cancel.load(Ordering::SeqCst) {
                return Ok(false);
            }
            on_event(SweepEvent::Starting {
                index,
                todo,
                point: p,
            });
            let job_spec = self.job(p.nodes, p.bw);
            // Settle, measuring how busy the machine is while nothing of ours runs.
            let before_settle = load::CpuTimes::now();
            if spec.settle > 0.0 {
                std::thread::sleep(Duration::from_secs_f64(spec.settle));
            }
            let before_run = load::CpuTimes::now();
            let busy = before_settle
                .zip(before_run)
                .and_then(|(a, b)| load::shares(a, b))
                .map(|s| s.0);
            if let Some(b) = busy.filter(|b| *b > load::BUSY) {
                on_event(SweepEvent::Busy { point: p, busy: b });
            }
            let started_at = now_utc();
            let outcome = match job::execute(self.cluster, &job_spec, self.cancel) {
                Ok(o) => o,
                Err(e) if self.options.fail_fast => {
                    return Err(e.context(format!(
                        "stopping the sweep at nodes={} bw={} rep={} (--fail-fast); everything stored is kept",
                        p.nodes, p.bw, p.repeat
                    )))
                }
                Err(e) => Outcome::not_started(self.cluster, &job_spec, format!("{e:#}")),
            };
            if outcome.status == RunStatus::Interrupted {
                return Ok(false);
            }
            let steal = before_run
                .zip(load::CpuTimes::now())
                .and_then(|(a, b)| load::shares(a, b))
                .map(|s| s.1);
            let traffic = outcome.fidelity.as_ref().map(|f| f.traffic());
            self.ran += 1;
            let ok = outcome.status == RunStatus::Ok;
            self.store.insert(&RunRow {
                point_key: p.key.clone(),
                series: self.sweep.series.clone(),
                workload: spec.workload.clone(),
                options: self.sweep.options.to_string(),
                nodes: p.nodes as u32,
                ranks_per_node: spec.ranks_per_node as u32,
                procs: outcome.procs as u32,
                bw_pct: p.bw,
                capacity: outcome.capacity_bytes_per_sec,
                latency_us: outcome.latency_us,
                repeat: p.repeat,
                started_at,
                seconds: ok.then_some(outcome.seconds),
                kernel_seconds: outcome.kernel_seconds(),
                teps: outcome.teps(),
                status: outcome.status,
                reason: outcome.reason.clone(),
                host: self.host.clone(),
                version: env!("CARGO_PKG_VERSION").into(),
                job: outcome.job.clone(),
                bytes_sent: traffic.map(|t| t.0),
                bytes_received: traffic.map(|t| t.1),
                cpu_busy_before: busy,
                cpu_steal: steal,
                metrics: outcome
                    .result
                    .as_ref()
                    .and_then(|r| serde_json::to_string(&r.metrics).ok()),
                fidelity: outcome
                    .fidelity
                    .as_ref()
                    .and_then(|f| serde_json::to_string(f).ok()),
                flag: outcome.flag(),
            })?;
            let per = self.started.elapsed().as_secs_f64() / self.ran as f64;
            on_event(SweepEvent::Finished {
                index,
                todo,
                point: p,
                outcome: &outcome,
                eta_s: per * (todo - index - 1) as f64,
            });
            // A run whose links did not run at their setting is stored (flagged) and
            // retried like a failed one.
            if ok && outcome.flag().is_none() {
                return Ok(true);
            }
            *self.failed.entry(p.key.clone()).or_default() += 1;
        }
    }
}

/// The seconds a PMM run on `procs` ranks sleeps for its emulated compute: q steps of
/// 2 (M/q)^3 flops at `gflops` (0 where the ranks form no square grid: `throttle-pmm`
/// refuses that itself).
fn emulated_pmm_seconds(size: usize, procs: usize, gflops: f64) -> f64 {
    let q = (procs as f64).sqrt().round() as usize;
    if q == 0 || q * q != procs {
        return 0.0;
    }
    q as f64 * emulation::pmm_step_seconds(size / q, gflops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(v: &[&str]) -> Vec<toml::Value> {
        v.iter()
            .map(|s| toml::Value::String(s.to_string()))
            .collect()
    }

    #[test]
    fn ranges_expand_inclusively_and_duplicates_go() {
        let bw = expand_bandwidths(&steps(&["100", "40:20:-5", "30"])).unwrap();
        let pcts: Vec<Option<f64>> = bw.iter().map(|p| p.percent()).collect();
        assert_eq!(
            pcts,
            vec![
                Some(100.0),
                Some(40.0),
                Some(35.0),
                Some(30.0),
                Some(25.0),
                Some(20.0)
            ]
        );
        let bw = expand_bandwidths(&steps(&["40:20:-2"])).unwrap();
        assert_eq!(bw.len(), 11);
        assert_eq!(
            expand_bandwidths(&steps(&["unlimited"])).unwrap(),
            vec![Pct::UNLIMITED]
        );
        for bad in ["40:20:2", "0:10:1", "40:20", "x", "101", "40:20:0"] {
            assert!(expand_bandwidths(&steps(&[bad])).is_err(), "{bad}");
        }
    }

    #[test]
    fn points_are_every_combination_in_a_seeded_order() {
        let text = r#"
            workload = "bfs"
            nodes = [1, 2]
            bandwidths = ["100", "50"]
            repeats = 2
            seed = 3
            [bfs]
            scale = 8
        "#;
        let a = Sweep::new(toml::from_str(text).unwrap()).unwrap();
        let b = Sweep::new(toml::from_str(text).unwrap()).unwrap();
        assert_eq!(a.points.len(), 8);
        assert_eq!(a.points, b.points, "same seed, same order");
        let mut keys: Vec<&str> = a.points.iter().map(|p| p.key.as_str()).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 8);
        assert!(a.series.starts_with("bfs ") && a.series.contains("scale=8"));
    }

    #[test]
    fn auto_repeats_continue_where_the_median_is_imprecise_and_stop_at_the_maximum() {
        let spec: SweepSpec = toml::from_str(
            "workload=\"bfs\"\nnodes=[1]\nbandwidths=[100, 50]\nrepeats=\"auto\"\nmax_repeats=4\nprecision=0.02",
        )
        .unwrap();
        let sweep = Sweep::new(spec).unwrap();
        assert_eq!(sweep.points.len(), 2 * AUTO_FIRST as usize);
        let path = std::env::temp_dir().join(format!("throttle-auto-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let store = Store::open(&path).unwrap();
        let put = |p: &SweepPoint, seconds: f64, status: RunStatus| {
            store
                .insert(&RunRow {
                    point_key: p.key.clone(),
                    series: sweep.series.clone(),
                    workload: "bfs".into(),
                    options: "{}".into(),
                    nodes: 1,
                    ranks_per_node: 1,
                    procs: 1,
                    bw_pct: p.bw,
                    capacity: 125e6,
                    latency_us: 0,
                    repeat: p.repeat,
                    started_at: "2026-11-23T00:00:00Z".into(),
                    seconds: (status == RunStatus::Ok).then_some(seconds),
                    kernel_seconds: None,
                    teps: None,
                    status,
                    reason: None,
                    host: "h".into(),
                    version: "0".into(),
                    job: "j".into(),
                    bytes_sent: None,
                    bytes_received: None,
                    cpu_busy_before: None,
                    cpu_steal: None,
                    metrics: None,
                    fidelity: None,
                    flag: None,
                })
                .unwrap();
        };
        // 100%: noisy (CV 0.1: +-16% at n = 3); 50%: precise (+-0.2%).
        for p in &sweep.points {
            let t = match (p.bw == Pct::FULL, p.repeat) {
                (true, 0) => 0.9,
                (true, 1) => 1.0,
                (true, _) => 1.1,
                (false, r) => 2.0 + r as f64 * 0.001,
            };
            put(p, t, RunStatus::Ok);
        }
        let failed = HashMap::new();
        let more = sweep.more_repeats(&store, &failed).unwrap();
        assert_eq!(more.len(), 1, "{more:?}");
        assert_eq!((more[0].bw, more[0].repeat), (Pct::FULL, 3));
        // The baseline may go to 2 x max_repeats = 8; a failed repeat is skipped over.
        put(&more[0], 1.0, RunStatus::Failed);
        put(
            &SweepPoint::new(&sweep.series, 1, 1, Pct::FULL, 4),
            1.0,
            RunStatus::Ok,
        );
        let more = sweep.more_repeats(&store, &failed).unwrap();
        assert_eq!(more[0].repeat, 5);
        for r in 5..8 {
            put(
                &SweepPoint::new(&sweep.series, 1, 1, Pct::FULL, r),
                1.0 + (r % 2) as f64 * 0.2,
                RunStatus::Ok,
            );
        }
        // 7 good runs at 100%: still imprecise, one more allowed.
        assert_eq!(sweep.more_repeats(&store, &failed).unwrap().len(), 1);
        // Unless a repeat of it was given up: then none (not one more each round).
        let gave_up = HashMap::from([(more[0].key.clone(), sweep.spec.retries + 1)]);
        assert!(sweep.more_repeats(&store, &gave_up).unwrap().is_empty());
        put(
            &SweepPoint::new(&sweep.series, 1, 1, Pct::FULL, 8),
            1.2,
            RunStatus::Ok,
        );
        assert!(sweep.more_repeats(&store, &failed).unwrap().is_empty());
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn precision_of_a_median_by_hand() {
        // CV 0.1, n = 4: 1.645 * 1.2533 * 0.1 / 2 = 0.1031.
        let t = [0.9, 1.0, 1.0, 1.1];
        let cv = crate::analysis::stats::cv(&t);
        assert!((median_precision(&t) - 1.644_853_6 * 1.253_314_1 * cv / 2.0).abs() < 1e-12);
        assert!(median_precision(&[1.0]).is_infinite());
    }

    #[test]
    fn bad_specs_are_explained() {
        for (text, hint) in [
            (
                "workload = \"sort\"\nnodes=[1]\nbandwidths=[100]",
                "unknown workload",
            ),
            (
                "workload = \"bfs\"\nnodes=[]\nbandwidths=[100]",
                "node counts",
            ),
            (
                "workload = \"bfs\"\nnodes=[1]\nbandwidths=[100]\nrepeats=\"auto\"\nmax_repeats=2",
                "max_repeats",
            ),
            (
                "workload = \"bfs\"\nnodes=[1]\nbandwidths=[100]\nrepeats=\"auto\"\nprecision=2",
                "precision",
            ),
            (
                "workload = \"bfs\"\nnodes=[1]\nbandwidths=[100]\nsettle=-1",
                "settle",
            ),
            // Checked before the first run, not by failing every point.
            (
                "workload = \"pmm\"\nnodes=[4, 3]\nbandwidths=[100]",
                "at 3 node(s) x 1 rank(s): pmm needs a square number of processes",
            ),
            (
                "workload = \"pmm\"\nnodes=[1]\nranks_per_node=4\nbandwidths=[100]\n[pmm]\nsize=99",
                "not a multiple of 2",
            ),
            // A section the workload does not read is not silently ignored.
            (
                "workload = \"pmm\"\nnodes=[4]\nbandwidths=[100]\n[bfs]\nscale=10",
                "[bfs] section",
            ),
            (
                "workload = \"loggps\"\nnodes=[2]\nbandwidths=[100]",
                "model loggps",
            ),
            (
                "workload = \"mw\"\nnodes=[2]\nbandwidths=[100]\n[mw]\nalpha=2",
                "alpha",
            ),
        ] {
            let spec: SweepSpec = toml::from_str(text).unwrap();
            let e = Sweep::new(spec)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains(hint), "{text}: {e}");
        }
        assert!(toml::from_str::<SweepSpec>(
            "workload=\"bfs\"\nnodes=[1]\nbandwidths=[100]\ncolour=1"
        )
        .is_err());
        for bad in ["0", "\"often\"", "2.5"] {
            let e = toml::from_str::<SweepSpec>(&format!(
                "workload=\"bfs\"\nnodes=[1]\nbandwidths=[100]\nrepeats={bad}"
            ))
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("`repeats` must be a number from 1 to 10000 or \"auto\""),
                "{e}"
            );
        }
        let e = toml::from_str::<SweepSpec>(
            "workload = \"pmm\"\nnodes=[1]\nbandwidths=[100]\n[pmm]\nbcast=\"tree\"",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("tree") && e.contains("binomial"), "{e}");
    }

    #[test]
    fn emulated_pmm_is_its_own_series_and_bad_rates_are_refused() {
        let spec = |extra: &str| {
            toml::from_str::<SweepSpec>(&format!(
                "workload = \"pmm\"\nnodes=[4]\nbandwidths=[100]\n[pmm]\nsize=64\n{extra}"
            ))
            .unwrap()
        };
        let real = Sweep::new(spec("")).unwrap();
        let emulated = Sweep::new(spec("emulate_gflops = 2.5")).unwrap();
        assert_eq!(real.options.get("emulate_gflops"), None);
        assert_eq!(emulated.options["emulate_gflops"], 2.5);
        assert!(matches!(
            emulated.workload.options(),
            Options::Pmm(PmmOptions {
                emulate_gflops: Some(g),
                ..
            }) if *g == 2.5
        ));
        for bad in ["0", "-1", "1e7", "1e-9"] {
            let e = match Sweep::new(spec(&format!("emulate_gflops = {bad}"))) {
                Ok(_) => panic!("{bad} accepted"),
                Err(e) => e.to_string(),
            };
            assert!(e.contains("emulate_gflops"), "{bad}: {e}");
        }
    }

    #[test]
    fn emulated_bfs_is_its_own_series_and_passes_its_rate_on() {
        let spec = |extra: &str| {
            toml::from_str::<SweepSpec>(&format!(
                "workload = \"bfs\"\nnodes=[4]\nbandwidths=[100]\n[bfs]\nscale=10\n{extra}"
            ))
            .unwrap()
        };
        let real = Sweep::new(spec("")).unwrap();
        let emulated = Sweep::new(spec("emulate_meps = 0.5")).unwrap();
        assert_eq!(real.options.get("emulate_meps"), None);
        assert_eq!(emulated.options["emulate_meps"], 0.5);
        assert_ne!(real.series, emulated.series);
        assert!(emulated.workload.emulates_compute() && !real.workload.emulates_compute());
        for bad in ["0", "-1", "1e7", "1e-4"] {
            let e = match Sweep::new(spec(&format!("emulate_meps = {bad}"))) {
                Ok(_) => panic!("{bad} accepted"),
                Err(e) => e.to_string(),
            };
            assert!(e.contains("emulate_meps"), "{bad}: {e}");
        }
    }

    #[test]
    fn emulated_compute_longer_than_the_time_limit_is_refused_before_any_run() {
        // M 300 on 2 x 2 at 0.0117 GFLOP/s: 2 steps of 2 x 150^3 flops, 1.15 s.
        assert!((emulated_pmm_seconds(300, 4, 0.0117) - 1.1538).abs() < 1e-3);
        assert_eq!(emulated_pmm_seconds(300, 3, 0.0117), 0.0);
        let spec = |limit: f64| {
            toml::from_str::<SweepSpec>(&format!(
                "workload = \"pmm\"\nnodes=[9, 4]\nbandwidths=[100]\ntime_limit={limit}\n[pmm]\nsize=300\nemulate_gflops=0.0117"
            ))
            .unwrap()
        };
        assert!(Sweep::new(spec(2.0)).is_ok());
        let e = match Sweep::new(spec(1.0)) {
            Ok(_) => panic!("1.15 s of sleep accepted under a 1 s limit"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("at 4 node(s)") && e.contains("time_limit"),
            "{e}"
        );
    }

    #[test]
    fn a_spec_built_in_code_is_the_same_sweep_once_written_and_read_back() {
        let mut spec = SweepSpec::new(
            Options::Pmm(PmmOptions {
                size: 300,
                bcast: throttle_proto::workload::Bcast::Binomial,
                emulate_gflops: Some(0.0117),
            }),
            vec![4, 9],
            vec![
                toml::Value::String("100".into()),
                toml::Value::String("50:30:-20".into()),
            ],
        );
        spec.repeats = Repeats::Fixed(2);
        spec.retries = 1;
        let text = toml::to_string(&spec).unwrap();
        let read: SweepSpec = toml::from_str(&text).unwrap();
        let (a, b) = (Sweep::new(spec).unwrap(), Sweep::new(read).unwrap());
        assert_eq!(a.series, b.series, "{text}");
        assert_eq!(a.points, b.points, "{text}");
        assert_eq!(
            a.series, "pmm bcast=\"binomial\" emulate_gflops=0.0117 size=300",
            "series names of stored sweeps must not change"
        );
        assert_eq!(b.spec.retries, 1);
        assert!(text.contains("[pmm]") && !text.contains("[bfs]"), "{text}");
    }

    #[test]
    fn the_example_specs_in_experiments_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let s = Sweep::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                assert!(!s.points.is_empty());
                n += 1;
            }
        }
        assert!(n >= 3, "expected the example specs in {}", dir.display());
    }

    #[test]
    fn job_prefixes_are_stable_and_tell_sweeps_apart() {
        let a = job_prefix(Path::new("/tmp/r.db"), "bfs scale=8");
        assert_eq!(a, job_prefix(Path::new("/tmp/r.db"), "bfs scale=8"));
        assert_ne!(a, job_prefix(Path::new("/tmp/s.db"), "bfs scale=8"));
        assert_ne!(a, job_prefix(Path::new("/tmp/r.db"), "bfs scale=9"));
        assert!(throttle_proto::name::is_valid(&format!(
            "{a}-bfs-1732000000000-abcdef"
        )));
    }

    #[test]
    fn timestamps_are_iso() {
        let t = now_utc();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z'));
    }
}
