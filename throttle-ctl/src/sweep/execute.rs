//! Running a sweep against a cluster: remove what a killed run of it left, skip what is
//! stored, warm up each node count, settle before each run, run, store the run with its
//! load and proof, retry failed and flagged points, and tell the caller every step.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use throttle_analysis::method::stats::Rng;
use throttle_analysis::{Analysis, Question};
use throttle_proto::{Lease, Pct};

use super::plan::{Sweep, SweepPoint};
use super::search;
use super::spec::Repeats;
use super::until::{self, Until};
use crate::cluster::agent_client::AgentClient;
use crate::cluster::Cluster;
use crate::job::{self, JobSpec, Outcome};
use crate::link_lease::LinkLease;
use crate::load;
use crate::measurements::{self, TimeSource};
use crate::run_status::RunStatus;
use crate::store::{RunRow, Store};

/// How a sweep behaves beyond its spec.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// Prefix of every job name of this sweep ([`job_prefix`]).
    pub job_prefix: String,
    /// Lease of each job (and its bandwidth) on the agents.
    pub lease: Lease,
    /// Stop at the first run that fails because a node could not be reached or refused
    /// to start it, instead of storing the failure and going on.
    pub fail_fast: bool,
    /// Go on after a failed warm-up run (the failures are then stored and retried like
    /// any run's); without it a failed warm-up stops the sweep with the program's own
    /// words, before anything of that node count is stored (hyperfine's convention).
    pub ignore_failure: bool,
    /// Try again the points an earlier invocation gave up (after their cause is fixed),
    /// each with its retries anew.
    pub retry_given_up: bool,
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

/// The runs an invocation made, every one stored: each attempt of a point, and of them
/// those that do not count (flagged: its links did not hold their setting; failed), each
/// stored with why and its point run again while its retries last. A sweep that stored
/// `ran` runs has `ran - flagged - failed` good ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Ran {
    pub ran: usize,
    pub flagged: usize,
    pub failed: usize,
}

impl Ran {
    fn plus(self, o: Ran) -> Ran {
        Ran {
            ran: self.ran + o.ran,
            flagged: self.flagged + o.flagged,
            failed: self.failed + o.failed,
        }
    }
}

/// How a sweep ended.
#[derive(Debug, PartialEq, serde::Serialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum SweepEnd {
    Complete {
        #[serde(flatten)]
        runs: Ran,
        /// Points stored by earlier runs of the sweep, not run again.
        already_stored: usize,
        gave_up: usize,
        /// How `[until]` ended (null without one).
        until: Option<UntilEnd>,
    },
    Interrupted {
        #[serde(flatten)]
        runs: Ran,
    },
}

impl SweepEnd {
    /// The runs it made.
    pub fn runs(&self) -> Ran {
        match self {
            SweepEnd::Complete { runs, .. } | SweepEnd::Interrupted { runs } => *runs,
        }
    }

    /// This end followed by `next`'s (the sweeps of a problem axis, one after the other):
    /// their runs added up, interrupted when either was.
    pub fn and_then(self, next: SweepEnd) -> SweepEnd {
        let runs = self.runs().plus(next.runs());
        match (self, next) {
            (
                SweepEnd::Complete {
                    already_stored: a,
                    gave_up: g,
                    until: u,
                    ..
                },
                SweepEnd::Complete {
                    already_stored: b,
                    gave_up: h,
                    until: v,
                    ..
                },
            ) => SweepEnd::Complete {
                runs,
                already_stored: a + b,
                gave_up: g + h,
                until: v.or(u),
            },
            _ => SweepEnd::Interrupted { runs },
        }
    }
}

/// How precision on request ended.
#[derive(Debug, PartialEq, serde::Serialize)]
pub struct UntilEnd {
    /// The answer at the size asked is within the width asked.
    pub reached: bool,
    /// Its widest interval there, points of bandwidth (null where it has none).
    pub width: Option<f64>,
    /// Runs it added, of its budget.
    pub spent: usize,
    pub budget: usize,
    /// Why it stopped, in words.
    pub why: String,
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
        /// The run failed or was flagged and the point will be run again.
        retry: bool,
    },
    /// A point failed more often than `retries` allows and is given up.
    GaveUp {
        point: &'a SweepPoint,
        attempts: u32,
        /// Why its last attempt in this invocation did not count (its flag or its failure's
        /// reason); `None` for a point given up by an earlier invocation.
        why: Option<&'a str>,
    },
    /// The unstored warm-up run of a node count is starting.
    WarmingUp { nodes: usize },
    /// The share of all cores (0..1) the run's own processes used during it (a local
    /// cluster's): runs that keep every core busy measure the CPUs as much as the link.
    Cpu { point: &'a SweepPoint, busy: f64 },
    /// `repeats = "auto"`: another round of repeats for points not yet precise enough.
    MoreRepeats { round: usize, points: usize },
    /// The first points of a node count were all given up: its other points are not run
    /// (counted as given up).
    /// `flagged`: its attempts were all flagged (links not at their setting), none
    /// failed; `starved`: most of them because an agent waited for a CPU; `capacity`:
    /// the cluster's link, when the cluster runs on this machine (a lower one is the
    /// remedy to suggest when the agents were not starved).
    SizeGivenUp {
        nodes: usize,
        points: u32,
        flagged: bool,
        starved: bool,
        capacity: Option<throttle_proto::rate::Rate>,
    },
    /// Demand search: a round of `steps` new bandwidth steps (`points` runs).
    Searching {
        round: usize,
        steps: usize,
        points: usize,
    },
    /// `[until]`: a round of precision on request: what it does next (a size, repeats),
    /// or why it stops (reached, budget spent, nothing affordable narrows it).
    Until {
        round: usize,
        next: &'a until::Next,
        /// Runs it added so far, of its budget.
        spent: usize,
        budget: usize,
    },
    /// Demand search done at one node count: where the measured steps leave each level,
    /// and the steps stored beyond the spec's grid against the budget `max_steps`.
    Searched {
        nodes: usize,
        levels: &'a [f64],
        brackets: Vec<search::Bracket>,
        spent: usize,
        max_steps: usize,
        /// The search's target width, points of bandwidth.
        width: f64,
    },
}

pub fn now_utc() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

impl Sweep {
    /// Refuse a cluster with fewer nodes than the sweep's largest node count (before
    /// anything is stored or changed).
    pub fn check_cluster(&self, cluster: &Cluster) -> Result<()> {
        let sizes = self.spec.until.iter().flat_map(|u| u.sizes.iter());
        if let Some(&max) = self.spec.nodes.iter().chain(sizes).max() {
            if max > cluster.file.nodes.len() {
                bail!(
                    "`nodes` asks for {max} nodes, the cluster file lists {} ({}): lower `nodes` or add nodes to the cluster",
                    cluster.file.nodes.len(),
                    cluster.node_names().join(", ")
                );
            }
        }
        // A local cluster runs every node here: a size whose ranks cannot fit this
        // machine's memory together is refused before the first run (issue 55).
        if cluster.file.local_dir.is_some() {
            let sizes = self.spec.until.iter().flat_map(|u| u.sizes.iter());
            for &n in self.spec.nodes.iter().chain(sizes) {
                self.workload
                    .check_memory_here(n, self.spec.ranks_per_node)
                    .map_err(|e| e.context(format!("at {n} node(s)")))?;
            }
        }
        Ok(())
    }

    /// The spec's own bandwidth steps, percent.
    fn grid(&self) -> Vec<Pct> {
        self.steps
            .iter()
            .copied()
            .filter(|s| !s.is_unlimited())
            .collect()
    }

    /// Under a demand search, one point (repeat 0) of every step stored beyond the spec's
    /// grid, at every node count: what [`Runner::auto_repeats`] repeats besides the spec's
    /// points.
    fn stored_search_points(&self, store: &Store) -> Result<Vec<SweepPoint>> {
        if self.spec.search.is_none() {
            return Ok(Vec::new());
        }
        let rows = store.rows()?;
        let grid = self.grid();
        let rpn = self.spec.ranks_per_node;
        let mut out = Vec::new();
        for &n in &self.spec.nodes {
            let prefix = SweepPoint::size_prefix(&self.key_base, n, rpn);
            for bw in search::stored_beyond(&rows, &prefix, &grid) {
                out.push(SweepPoint::new(&self.key_base, n, rpn, bw, 0));
            }
        }
        Ok(out)
    }

    /// The demand search's next points: the new steps of every node count above one (each
    /// repeat not yet stored), and the repeats still missing of steps it placed before (a
    /// resumed sweep), leaving out what was given up. `tried` remembers the steps placed.
    /// One node carries no traffic between nodes, so it has no demand to search for: the
    /// search spent 6-9 runs there and once read a crossing into its timing noise.
    fn search_round(
        &self,
        store: &Store,
        failed: &HashMap<String, u32>,
        nodes: &[usize],
        tried: &mut HashMap<usize, HashSet<Pct>>,
        searched: &[SweepPoint],
    ) -> Result<Vec<SweepPoint>> {
        let Some(search) = &self.spec.search else {
            return Ok(Vec::new());
        };
        let rows = store.rows()?;
        let done = store.done_points()?;
        let grid = self.grid();
        let rpn = self.spec.ranks_per_node;
        let mut out = Vec::new();
        for &n in nodes.iter().filter(|&&n| n > 1) {
            let prefix = SweepPoint::size_prefix(&self.key_base, n, rpn);
            let placed = tried.entry(n).or_default();
            let mut steps = search::next_steps(search, &rows, &prefix, &grid, placed);
            // Steps placed before, by this invocation or a killed one, whose repeats are
            // not all stored.
            for bw in search::stored_beyond(&rows, &prefix, &grid) {
                if !steps.contains(&bw) {
                    steps.push(bw);
                }
            }
            for bw in steps {
                placed.insert(bw);
                for rep in 0..self.spec.repeats.first() {
                    let p = SweepPoint::new(&self.key_base, n, rpn, bw, rep);
                    let given_up = failed.get(&p.key).is_some_and(|&f| f > self.spec.retries);
                    if !done.contains(&p.key)
                        && !given_up
                        && !searched.iter().any(|s| s.key == p.key)
                    {
                        out.push(p);
                    }
                }
            }
        }
        if self.spec.randomize {
            let mut rng = Rng::new(self.spec.seed ^ 0x5EA2_C400 ^ out.len() as u64);
            for i in (1..out.len()).rev() {
                out.swap(i, rng.below(i + 1));
            }
        }
        Ok(out)
    }

    /// The demand search's rounds at `nodes` (with the auto repeats of what it placed),
    /// then where it left each level; `false` when interrupted. `earlier`: search steps an
    /// earlier invocation stored; `searched` and `tried` carry what this invocation
    /// placed from one call to the next.
    fn search_rounds(
        &self,
        runner: &mut Runner<'_>,
        nodes: &[usize],
        (earlier, searched, tried): (
            &[SweepPoint],
            &mut Vec<SweepPoint>,
            &mut HashMap<usize, HashSet<Pct>>,
        ),
        on_event: &mut dyn FnMut(SweepEvent<'_>),
    ) -> Result<bool> {
        let Some(search) = &self.spec.search else {
            return Ok(true);
        };
        let store = runner.store;
        let mut round = 0;
        loop {
            let todo = self.search_round(store, &runner.failed, nodes, tried, searched)?;
            if todo.is_empty() {
                break;
            }
            round += 1;
            let steps: HashSet<(usize, Pct)> = todo.iter().map(|p| (p.nodes, p.bw)).collect();
            on_event(SweepEvent::Searching {
                round,
                steps: steps.len(),
                points: todo.len(),
            });
            for (i, p) in todo.iter().enumerate() {
                if !runner.point(p, i, todo.len(), on_event)? {
                    return Ok(false);
                }
            }
            searched.extend(todo);
            if !runner.auto_repeats(&[earlier, &searched[..]].concat(), on_event)? {
                return Ok(false);
            }
        }
        let rows = store.rows()?;
        let grid = self.grid();
        for &n in nodes.iter().filter(|&&n| n > 1) {
            let prefix = SweepPoint::size_prefix(&self.key_base, n, self.spec.ranks_per_node);
            let (brackets, spent) = search::brackets(search, &rows, &prefix, &grid);
            on_event(SweepEvent::Searched {
                nodes: n,
                levels: &search.levels,
                brackets,
                spent,
                max_steps: search.max_steps,
                width: search.width,
            });
        }
        Ok(true)
    }

    /// The CTI levels this sweep measures closely: `[until]`'s, else `[search]`'s.
    fn levels(&self) -> Option<Vec<f64>> {
        self.spec
            .until
            .as_ref()
            .and_then(|u| u.levels.clone())
            .or_else(|| self.spec.search.as_ref().map(|s| s.levels.clone()))
    }

    /// The answer `[until]` narrows: the analysis of this series as stored, projected to
    /// its size with its held-out sizes held out.
    fn analyse(&self, store: &Store, until: &Until) -> Result<Analysis> {
        let mut rows = store.rows()?;
        rows.retain(|r| r.series == self.series && r.problem == self.problem.map(|n| n as f64));
        let (obs, chosen) = measurements::observations(&rows, TimeSource::Auto)?;
        let levels = self
            .levels()
            .unwrap_or_else(|| vec![10.0, 15.0, 20.0, 25.0]);
        let mut predict = until.held_out.clone();
        predict.push(until.procs);
        throttle_analysis::analyze(
            &obs,
            &Question {
                cti: levels,
                predict,
                series: Some(self.series.clone()),
                time_source: chosen.what.to_string(),
                capacity: store.capacity()?,
                keep_flagged: false,
                keep_without_traffic: false,
                interp: Default::default(),
                unit: chosen.unit,
            },
        )
    }

    /// Every point of the spec's grid at `nodes` (a size `[until]` adds), the baseline
    /// with the search's doubled repeats.
    fn grid_points(&self, nodes: usize) -> Vec<SweepPoint> {
        let mut out = Vec::new();
        for bw in &self.steps {
            let repeats = match self.spec.search {
                Some(_) if *bw == Pct::FULL => 2 * self.spec.repeats.first(),
                _ => self.spec.repeats.first(),
            };
            for r in 0..repeats {
                out.push(SweepPoint::new(
                    &self.key_base,
                    nodes,
                    self.spec.ranks_per_node,
                    *bw,
                    r,
                ));
            }
        }
        out
    }

    /// One more repeat of each (node count, bandwidth) of `points`: the next repeat index
    /// stored for it.
    fn repeat_points(&self, store: &Store, points: &[(usize, f64)]) -> Result<Vec<SweepPoint>> {
        let rows = store.rows()?;
        let rpn = self.spec.ranks_per_node;
        let mut out = Vec::new();
        for &(n, bw) in points {
            let Ok(bw) = Pct::new(bw) else { continue };
            let prefix = SweepPoint::group(&self.key_base, n, rpn, bw);
            let next = rows
                .iter()
                .filter(|r| r.point_key.starts_with(&prefix))
                .filter_map(|r| r.point_key.rsplit("rep=").next()?.parse::<u32>().ok())
                .max()
                .map_or(0, |m| m + 1);
            out.push(SweepPoint::new(&self.key_base, n, rpn, bw, next));
        }
        Ok(out)
    }

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
        self.check_cluster(cluster)?;
        // The levels this sweep measures closely are the analysis's default levels.
        if let Some(levels) = self.levels() {
            store.set_levels(&self.series, &levels)?;
        } else if self.spec.until.is_some() {
            store.set_levels(&self.series, &[10.0, 15.0, 20.0, 25.0])?;
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
        let already_stored = self.points.len() - todo.len();
        if already_stored > 0 {
            on_event(SweepEvent::Resuming {
                stored: already_stored,
                total: self.points.len(),
            });
        }
        let mut runner = Runner::new(self, cluster, store, options, cancel)?;
        if !runner.run_each(&todo, &mut on_event)? {
            return Ok(SweepEnd::Interrupted { runs: runner.runs });
        }
        // Steps an earlier, stopped run of the search placed get their extra repeats too.
        let earlier = self.stored_search_points(store)?;
        if !runner.auto_repeats(&earlier, &mut on_event)? {
            return Ok(SweepEnd::Interrupted { runs: runner.runs });
        }
        let mut searched: Vec<SweepPoint> = Vec::new();
        let mut tried: HashMap<usize, HashSet<Pct>> = HashMap::new();
        if !self.search_rounds(
            &mut runner,
            &self.spec.nodes,
            (&earlier, &mut searched, &mut tried),
            &mut on_event,
        )? {
            return Ok(SweepEnd::Interrupted { runs: runner.runs });
        }
        let mut until_end = None;
        if let Some(until) = &self.spec.until {
            let Some(end) = self.until_rounds(
                &mut runner,
                until,
                (&earlier, &mut searched, &mut tried),
                &mut on_event,
            )?
            else {
                return Ok(SweepEnd::Interrupted { runs: runner.runs });
            };
            until_end = Some(end);
        }
        Ok(SweepEnd::Complete {
            runs: runner.runs,
            already_stored,
            gave_up: runner.gave_up,
            until: until_end,
        })
    }

    /// `[until]`: rounds of precision on request (a new size with its search, or more
    /// repeats) until the answer is narrow enough, the budget is spent, or nothing
    /// affordable narrows it; how it ended, or `None` when interrupted. `earlier`,
    /// `searched` and `tried` are as for [`Sweep::search_rounds`].
    fn until_rounds(
        &self,
        runner: &mut Runner<'_>,
        until: &Until,
        (earlier, searched, tried): (
            &[SweepPoint],
            &mut Vec<SweepPoint>,
            &mut HashMap<usize, HashSet<Pct>>,
        ),
        on_event: &mut dyn FnMut(SweepEvent<'_>),
    ) -> Result<Option<UntilEnd>> {
        let store = runner.store;
        let mut nodes = self.spec.nodes.clone();
        let started = runner.runs.ran;
        let mut round = 0;
        loop {
            round += 1;
            let spent = runner.runs.ran - started;
            let left = until.budget.saturating_sub(spent);
            let next = match self.analyse(store, until) {
                Ok(a) => until::next(until, &a, &nodes, self.spec.ranks_per_node, left),
                Err(e) => until::Next::Stuck {
                    width: None,
                    why: format!("the analysis failed: {e:#}"),
                },
            };
            let points: Vec<SweepPoint> = match &next {
                until::Next::Size { nodes: n } => {
                    nodes.push(*n);
                    self.grid_points(*n)
                }
                until::Next::Repeats { points } => self.repeat_points(store, points)?,
                _ => Vec::new(),
            };
            on_event(SweepEvent::Until {
                round,
                next: &next,
                spent,
                budget: until.budget,
            });
            if points.is_empty() {
                return Ok(Some(until_stopped(until, next, spent)));
            }
            let done = store.done_points()?;
            let todo: Vec<&SweepPoint> = points.iter().filter(|p| !done.contains(&p.key)).collect();
            if !runner.run_each(&todo, on_event)? {
                return Ok(None);
            }
            if let until::Next::Size { nodes: n } = next {
                if !self.search_rounds(runner, &[n], (earlier, searched, tried), on_event)? {
                    return Ok(None);
                }
            }
            if runner.runs.ran - started >= until.budget {
                let spent = runner.runs.ran - started;
                return Ok(Some(self.until_budget_spent(
                    store,
                    until,
                    (round, spent),
                    on_event,
                )));
            }
        }
    }

    /// `[until]` after a round that spent its budget (`spent` runs, round `round`): the
    /// width the answer reached, told as one more round that is stuck; how it ended.
    fn until_budget_spent(
        &self,
        store: &Store,
        until: &Until,
        (round, spent): (usize, usize),
        on_event: &mut dyn FnMut(SweepEvent<'_>),
    ) -> UntilEnd {
        let width = self
            .analyse(store, until)
            .ok()
            .and_then(|a| a.bottom_line.advice)
            .map(|a| a.width);
        let why = format!(
            "the budget of {} runs is spent{}",
            until.budget,
            width.map_or(String::new(), |w| format!(
                " (the answer is {w:.1} pp wide, {} asked)",
                until.width
            ))
        );
        let next = until::Next::Stuck {
            width,
            why: why.clone(),
        };
        on_event(SweepEvent::Until {
            round: round + 1,
            next: &next,
            spent,
            budget: until.budget,
        });
        UntilEnd {
            reached: width.is_some_and(|w| w <= until.width),
            width,
            spent,
            budget: until.budget,
            why,
        }
    }
}

/// How `[until]` ended when its round `next` asked for no points (`spent` runs added).
fn until_stopped(until: &Until, next: until::Next, spent: usize) -> UntilEnd {
    match next {
        until::Next::Reached { width } => UntilEnd {
            reached: true,
            width: Some(width),
            spent,
            budget: until.budget,
            why: format!(
                "the answer at {} procs is within {} pp",
                until.procs, until.width
            ),
        },
        until::Next::Stuck { width, why } => UntilEnd {
            reached: false,
            width,
            spent,
            budget: until.budget,
            why,
        },
        _ => UntilEnd {
            reached: false,
            width: None,
            spent,
            budget: until.budget,
            why: "every point it asked for is stored already".into(),
        },
    }
}

/// What one invocation of a sweep carries from run to run.
struct Runner<'a> {
    sweep: &'a Sweep,
    cluster: &'a Cluster,
    store: &'a Store,
    options: &'a SweepOptions,
    cancel: &'a AtomicBool,
    /// The cluster's links, held for the sweep: set for each run, put back when the sweep
    /// ends however it ends.
    links: LinkLease,
    host: String,
    failed: HashMap<String, u32>,
    /// Node counts that had their warm-up run in this invocation.
    warmed: HashSet<usize>,
    started: Instant,
    runs: Ran,
    gave_up: usize,
    /// Per node count: points given up, and points that succeeded, in this invocation.
    outcomes: HashMap<usize, (u32, u32)>,
    /// Node counts whose first [`HOPELESS`] points were all given up: their other points
    /// are not run.
    hopeless: HashSet<usize>,
    /// Points whose last run was flagged for what no retry changes (kernel-paced traffic
    /// beyond the link: `RunFidelity::beyond_link`): given up without retries.
    unrepeatable: HashSet<String>,
    /// Per node count: the attempts in this invocation that were not good.
    troubles: HashMap<usize, Troubles>,
}

/// A node count's attempts that were not good: failed, flagged, and of those flagged the
/// ones whose agents were starved of CPU.
#[derive(Clone, Copy, Debug, Default)]
struct Troubles {
    failed: u32,
    flagged: u32,
    starved: u32,
}

/// A node count whose first this many points were all given up (failed or flagged every
/// time, with none good) is not run further in this invocation: on a machine that cannot
/// emulate it (its agents starved), every run of it would be tried and thrown away.
const HOPELESS: u32 = 3;

/// How busy the machine was around one run: the share of its CPUs busy over the settle
/// pause before it, and the share stolen from it while it ran.
struct RunLoad {
    busy: Option<f64>,
    steal: Option<f64>,
    /// The run's own processes' share of the cores (`RunRow::cpu_own`).
    own: Option<f64>,
}

impl<'a> Runner<'a> {
    /// A runner for one invocation of `sweep`, with the failed attempts stored so far.
    fn new(
        sweep: &'a Sweep,
        cluster: &'a Cluster,
        store: &'a Store,
        options: &'a SweepOptions,
        cancel: &'a AtomicBool,
    ) -> Result<Runner<'a>> {
        Ok(Runner {
            sweep,
            cluster,
            store,
            options,
            cancel,
            links: LinkLease::hold(cluster, options.lease),
            host: std::fs::read_to_string("/etc/hostname")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            failed: if options.retry_given_up {
                HashMap::new()
            } else {
                store.failed_attempts()?
            },
            warmed: HashSet::new(),
            started: Instant::now(),
            runs: Ran::default(),
            gave_up: 0,
            outcomes: HashMap::new(),
            hopeless: HashSet::new(),
            unrepeatable: HashSet::new(),
            troubles: HashMap::new(),
        })
    }

    /// Run every point of `todo` in turn ([`Runner::point`]); `false` when interrupted.
    fn run_each(
        &mut self,
        todo: &[&SweepPoint],
        on_event: &mut dyn FnMut(SweepEvent<'_>),
    ) -> Result<bool> {
        for (i, p) in todo.iter().enumerate() {
            if !self.point(p, i, todo.len(), on_event)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Under `repeats = "auto"`, rounds of more repeats (of the spec's points and
    /// `searched`) until every median is precise enough; `false` when interrupted.
    fn auto_repeats(
        &mut self,
        searched: &[SweepPoint],
        on_event: &mut dyn FnMut(SweepEvent<'_>),
    ) -> Result<bool> {
        if self.sweep.spec.repeats != Repeats::Auto {
            return Ok(true);
        }
        let mut round = 0;
        loop {
            let mut more = self
                .sweep
                .more_repeats(self.store, &self.failed, searched)?;
            // A node count given up runs nothing: asked again, it would be asked forever.
            more.retain(|p| !self.hopeless.contains(&p.nodes));
            if more.is_empty() {
                return Ok(true);
            }
            round += 1;
            on_event(SweepEvent::MoreRepeats {
                round,
                points: more.len(),
            });
            let ran = self.runs.ran;
            for (i, p) in more.iter().enumerate() {
                if !self.point(p, i, more.len(), on_event)? {
                    return Ok(false);
                }
            }
            if self.runs.ran == ran {
                // Nothing could be run (every point given up at once): nothing would
                // change in another round either.
                return Ok(true);
            }
        }
    }

    /// The job of a run at `nodes` and `bw`, with `latency_us` added (a latency point's);
    /// a sweep with latency points runs every other point without added latency, so that
    /// none keeps the last latency point's.
    fn job(&self, nodes: usize, bw: Pct, latency_us: Option<u64>) -> JobSpec {
        let spec = &self.sweep.spec;
        JobSpec {
            workload: self.sweep.workload.clone(),
            nodes,
            ranks_per_node: spec.ranks_per_node,
            bw,
            latency_us: latency_us.or((!spec.latencies.is_empty()).then_some(0)),
            time_limit: self.sweep.spec.time_limit,
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
        let sweep = self.sweep;
        let spec = &sweep.spec;
        if spec.warmup && self.warmed.insert(p.nodes) && !self.warm_up(p.nodes, on_event)? {
            return Ok(false);
        }
        if self.hopeless.contains(&p.nodes) {
            self.gave_up += 1;
            return Ok(true);
        }
        // Only points attempted in this invocation count towards giving a size up: one
        // given up by an earlier invocation says nothing about the machine now.
        let mut attempted = false;
        let mut why: Option<String> = None;
        loop {
            let attempts = self.failed.get(&p.key).copied().unwrap_or(0);
            if attempts > spec.retries || self.unrepeatable.contains(&p.key) {
                self.give_up(p, (attempts, why.as_deref()), attempted, on_event);
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
            let job_spec = self.job(p.nodes, p.bw, p.latency_us);
            let (before_run, busy) = self.settle();
            let started_at = now_utc();
            attempted = true;
            let agents: Vec<u32> = self
                .cluster
                .file
                .nodes
                .iter()
                .filter_map(|n| n.pid)
                .collect();
            let cpu_before = (load::own_cpu_seconds(&agents), Instant::now());
            let outcome = match job::execute(self.cluster, &self.links, &job_spec, self.cancel) {
                Ok(o) => o,
                Err(e) if self.options.fail_fast => {
                    return Err(e.context(format!(
                        "stopping the sweep at nodes={} {} rep={} (--fail-fast); everything stored is kept",
                        p.nodes,
                        p.setting(),
                        p.repeat
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
            // The run's own processes' share of all cores (a local cluster's: its agents
            // and their ranks, and a command's processes), stored with the run.
            let mut own = None;
            if !agents.is_empty() {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
                let wall = cpu_before.1.elapsed().as_secs_f64();
                let used = load::own_cpu_seconds(&agents) - cpu_before.0;
                if wall > 0.0 {
                    let busy = (used / (wall * cores)).clamp(0.0, 1.0);
                    own = Some(busy);
                    on_event(SweepEvent::Cpu { point: p, busy });
                }
            }
            self.runs.ran += 1;
            let ok = outcome.status == RunStatus::Ok;
            let row = self.row(p, &outcome, started_at, RunLoad { busy, steal, own });
            self.store.insert_with_output(&row, &outcome.output)?;
            let per = self.started.elapsed().as_secs_f64() / self.runs.ran as f64;
            let good = ok && outcome.flag().is_none();
            let repeatable = !outcome.fidelity.as_ref().is_some_and(|f| f.beyond_link());
            on_event(SweepEvent::Finished {
                index,
                todo,
                point: p,
                outcome: &outcome,
                eta_s: per * (todo - index - 1) as f64,
                retry: !good && attempts < spec.retries && repeatable,
            });
            // A run whose links did not run at their setting is stored (flagged) and
            // retried like a failed one.
            if ok && outcome.flag().is_none() {
                self.outcomes.entry(p.nodes).or_default().1 += 1;
                return Ok(true);
            }
            *self.failed.entry(p.key.clone()).or_default() += 1;
            if !repeatable {
                self.unrepeatable.insert(p.key.clone());
            }
            why = outcome.flag().or_else(|| outcome.reason.clone());
            let seen = self.troubles.entry(p.nodes).or_default();
            if !ok {
                seen.failed += 1;
                self.runs.failed += 1;
            } else {
                seen.flagged += 1;
                self.runs.flagged += 1;
                seen.starved += u32::from(outcome.fidelity.as_ref().is_some_and(|f| f.starved()));
            }
        }
    }

    /// The unstored warm-up run of a node count at full bandwidth; `false` when
    /// interrupted. A warm-up whose program fails stops the sweep with why (the program's
    /// own lines), unless failures are to be ignored: every run after it would fail
    /// alike, each retried and given up. One that cannot start (a node down) does not:
    /// the points say so, node by node.
    fn warm_up(&self, nodes: usize, on_event: &mut dyn FnMut(SweepEvent<'_>)) -> Result<bool> {
        if self.cancel.load(Ordering::SeqCst) {
            return Ok(false);
        }
        on_event(SweepEvent::WarmingUp { nodes });
        // Not stored: whatever it measured the runs after it measure again.
        let why = match job::execute(
            self.cluster,
            &self.links,
            &self.job(nodes, Pct::FULL, None),
            self.cancel,
        ) {
            Ok(o) if o.status == RunStatus::Interrupted => return Ok(false),
            Ok(o) if o.status == RunStatus::Ok => return Ok(true),
            Ok(o) => o.reason.unwrap_or_else(|| format!("{:?}", o.status)),
            // The job could not start (a node unreachable or refusing): not the
            // program's failure; its points fail with the reason naming the node, and
            // the sweep goes on (or stops there with --fail-fast).
            Err(_) => return Ok(true),
        };
        if self.options.ignore_failure {
            return Ok(true);
        }
        anyhow::bail!(
            "the warm-up run on {nodes} node(s) failed, so every run would: {why}\nnothing of it was stored; fix the program or its command line and run the same command again, or pass --ignore-failure to go on (its failed runs are stored and given up)"
        )
    }

    /// Give `p` up after `attempts` attempts, the last of them not good because of `why`;
    /// a point `attempted` in this invocation counts towards giving its whole node count
    /// up ([`HOPELESS`]).
    fn give_up(
        &mut self,
        p: &SweepPoint,
        (attempts, why): (u32, Option<&str>),
        attempted: bool,
        on_event: &mut dyn FnMut(SweepEvent<'_>),
    ) {
        self.gave_up += 1;
        on_event(SweepEvent::GaveUp {
            point: p,
            attempts,
            why,
        });
        if !attempted {
            return;
        }
        let seen = self.outcomes.entry(p.nodes).or_default();
        seen.0 += 1;
        if seen.0 >= HOPELESS && seen.1 == 0 && self.hopeless.insert(p.nodes) {
            let t = self.troubles.get(&p.nodes).copied().unwrap_or_default();
            on_event(SweepEvent::SizeGivenUp {
                nodes: p.nodes,
                points: seen.0,
                flagged: t.failed == 0,
                starved: 2 * t.starved > t.flagged,
                capacity: self
                    .cluster
                    .file
                    .local_dir
                    .is_some()
                    .then_some(self.cluster.file.capacity),
            });
        }
    }

    /// The settle pause before a run, measuring how busy the machine is while nothing of
    /// ours runs (stored with the run; `analyze` names the busy runs whose time stands
    /// out); the CPU times at its end and the busy share.
    fn settle(&self) -> (Option<load::CpuTimes>, Option<f64>) {
        let before_settle = load::CpuTimes::now();
        if self.sweep.spec.settle > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(self.sweep.spec.settle));
        }
        let before_run = load::CpuTimes::now();
        let busy = before_settle
            .zip(before_run)
            .and_then(|(a, b)| load::shares(a, b))
            .map(|s| s.0);
        (before_run, busy)
    }

    /// The stored row of one attempt at `p`, started at `started_at`.
    fn row(&self, p: &SweepPoint, outcome: &Outcome, started_at: String, load: RunLoad) -> RunRow {
        let spec = &self.sweep.spec;
        let ok = outcome.status == RunStatus::Ok;
        let traffic = outcome.fidelity.as_ref().map(|f| f.traffic());
        RunRow {
            point_key: p.key.clone(),
            series: self.sweep.series.clone(),
            problem: self.sweep.problem.map(|n| n as f64),
            latency_step: p.latency_us,
            cpu_own: load.own,
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
            cpu_busy_before: load.busy,
            cpu_steal: load.steal,
            metrics: outcome
                .result
                .as_ref()
                .and_then(|r| serde_json::to_string(&r.metrics).ok()),
            fidelity: outcome
                .fidelity
                .as_ref()
                .and_then(|f| serde_json::to_string(f).ok()),
            flag: outcome.flag(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A search step an earlier, stopped invocation stored with too few repeats gets its
    /// `repeats = "auto"` repeats in the next one (it used to get them only if placed
    /// again).
    #[test]
    fn a_resumed_search_repeats_the_steps_it_stored_before() {
        let spec: super::super::SweepSpec = toml::from_str(
            "workload=\"bfs\"\nnodes=[1]\nbandwidths=[100, 50]\nrepeats=\"auto\"\nmax_repeats=6\nprecision=0.02\n[bfs]\nscale=8\n[search]\nlevels=[10]",
        )
        .unwrap();
        let sweep = Sweep::new(spec).unwrap();
        let path =
            crate::store::test_dir().join(format!("throttle-resume-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let store = Store::open(&path).unwrap();
        let put = |p: &SweepPoint, seconds: f64| {
            store
                .insert(&RunRow {
                    seconds: Some(seconds),
                    ..RunRow::for_test(&p.key, &sweep.series, p.bw, p.repeat)
                })
                .unwrap();
        };
        // The spec's points: precise.
        for p in &sweep.points {
            put(p, if p.bw == Pct::FULL { 1.0 } else { 1.3 });
        }
        // A step the search placed, stored with three noisy runs.
        let step = Pct::new(62.5).unwrap();
        for (r, t) in [1.0, 1.2, 1.4].into_iter().enumerate() {
            put(&SweepPoint::new(&sweep.series, 1, 1, step, r as u32), t);
        }
        let failed = HashMap::new();
        assert!(
            sweep.more_repeats(&store, &failed, &[]).unwrap().is_empty(),
            "the spec's own points are precise"
        );
        let earlier = sweep.stored_search_points(&store).unwrap();
        assert_eq!(earlier.len(), 1, "{earlier:?}");
        let more = sweep.more_repeats(&store, &failed, &earlier).unwrap();
        assert_eq!(more.len(), 1, "{more:?}");
        assert_eq!((more[0].bw, more[0].repeat), (step, 3));
        let _ = std::fs::remove_file(&path);
    }

    /// Issue 54: the demand search places no step on one node (no traffic between nodes,
    /// no demand), and does on two.
    #[test]
    fn the_demand_search_leaves_one_node_alone() {
        let spec: super::super::SweepSpec = toml::from_str(
            "workload=\"bfs\"\nnodes=[1, 2]\nbandwidths=[100, 50]\nrepeats=1\n[bfs]\nscale=8\n[search]\nlevels=[10]",
        )
        .unwrap();
        let sweep = Sweep::new(spec).unwrap();
        let path =
            crate::store::test_dir().join(format!("throttle-search1-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let store = Store::open(&path).unwrap();
        // Both sizes' CTI at 50% is 30%: the 10% level lies between the steps at each.
        for p in &sweep.points {
            store
                .insert(&RunRow {
                    seconds: Some(if p.bw == Pct::FULL { 1.0 } else { 1.3 }),
                    ..RunRow::for_test(&p.key, &sweep.series, p.bw, p.repeat)
                })
                .unwrap();
        }
        let mut tried = HashMap::new();
        let next = sweep
            .search_round(&store, &HashMap::new(), &[1, 2], &mut tried, &[])
            .unwrap();
        assert!(!next.is_empty(), "two nodes get steps");
        assert!(next.iter().all(|p| p.nodes == 2), "{next:?}");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn timestamps_are_iso() {
        let t = now_utc();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z'));
    }
}
