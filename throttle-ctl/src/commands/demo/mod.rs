//! `throttle-ctl demo`: the whole method on a local emulated cluster, in about two
//! minutes and a quarter on a 2-core machine.
//!
//! Brings agents up, sweeps a program over node counts at a coarse grid of bandwidths and
//! then searches for each size's demand at CTI 10-25% (steps placed until each level lies
//! between steps at most 5 points apart; the largest size is held out for validation),
//! then, while the answer at twice the held-out size is wider than 25 points, repeats the
//! runs that narrow it (`[until]`, at most 40 runs), analyses, projects to the held-out
//! size and to twice it, prints the answer first, then
//! the tables with the noise floor and the backtest, writes the report, and takes the
//! cluster down, also on error or Ctrl-C. Everything lands in one directory (cluster
//! file, results database, sweep spec, report).
//!
//! The default program is master/worker on 2, 3, 4, 6 and 8 nodes at 100 Mbit/s, its
//! workers sleeping for their share of the work, so that 8 nodes fit on a 2-core machine
//! without competing for its cores: four fitted sizes are the fewest from which the
//! backtest checks two (each from the sizes below it), which a projection needs to be
//! trusted, and 8 nodes is a size such a machine can still measure to compare the
//! projection with. Fox's matrix multiplication (`--workload pmm`, the earlier default)
//! needs square grids: its third fitted size is 16 and its held-out one 25, whose runs a
//! 2-core machine flags (25 agents and 25 ranks starve the agents). `--workload bfs`
//! runs the paper's BFS on 1-4 nodes (real compute: CPU-bound at its held-out size on a
//! small machine). `--weak` runs the problem axis instead ([`weak`]).

mod weak;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

use anyhow::{Context as _, Result};
use clap::Args as ClapArgs;
use throttle_analysis::{Analysis, Question};
use throttle_proto::workload::{Bcast, BfsOptions, MwOptions, MwWork, Options, PmmOptions};
use throttle_proto::Rate;

use super::local::Links;
use super::{interrupt_flag, parse_cti, parse_list, Context, Exit};
use crate::cluster::local::{self as local_cluster, LocalUp};
use crate::cluster::Cluster;
use crate::measurements::{self, TimeSource};
use crate::output;
use crate::progress::SweepProgress;
use crate::report;
use crate::store::Store;
use crate::sweep::search::Search;
use crate::sweep::steps::Steps;
use crate::sweep::until::Until;
use crate::sweep::{self, Repeats, Sweep, SweepEnd, SweepSpec};

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "Writes everything to --dir: cluster file, results.db, sweep.toml, report/index.html.\nThe cluster is taken down at the end, also after an error or Ctrl-C."
)]
pub struct Args {
    /// Where the results and the report go.
    #[arg(long, default_value = "throttle-demo")]
    dir: PathBuf,
    /// The program: `mw` (master/worker: the master sends each worker its tasks and
    /// collects the results; the workers sleep for their share of the work, so the ranks
    /// do not compete for this machine's cores), `pmm` (Fox's matrix multiplication,
    /// compute emulated the same way; its square grids put the held-out size at 25
    /// nodes, more than a small machine can emulate) or `bfs` (Graph500 BFS, real
    /// compute: on a small machine its larger sizes are CPU-bound, and the sweep says
    /// so at its end).
    #[arg(long, value_enum, default_value = "mw")]
    workload: DemoWorkload,
    /// Node counts (one rank each); the largest is held out for validation
    /// [default: mw 2,3,4,6,8 (four sizes to fit: the backtest checks two of them);
    /// pmm 4,9,16,25 (square grids); bfs 1,2,3,4].
    #[arg(long)]
    sizes: Option<String>,
    /// Emulated link per node [default: mw and pmm 100Mbit; bfs 1Gbit].
    #[arg(long)]
    capacity: Option<Rate>,
    /// PMM: matrix order (a multiple of every grid side).
    #[arg(long, default_value_t = 300)]
    size: usize,
    /// PMM: the emulated node's rate, GFLOP/s. With the 100 Mbit/s default link this puts
    /// communication at about 4% (4 nodes) to 30% (25 nodes) of the time at full
    /// bandwidth: slow nodes on a slow link, scaled down together (the ranks sleep, but
    /// a 2-core machine still cannot run 25 of them and their agents: see --workload).
    #[arg(long, default_value_t = 0.0117)]
    emulate_gflops: f64,
    /// Master/worker: bytes each iteration moves through the master.
    #[arg(long, default_value_t = 100_000)]
    mw_volume: u64,
    /// Master/worker: seconds of work per iteration, shared by the workers.
    #[arg(long, default_value_t = 0.6)]
    mw_compute: f64,
    /// BFS graph scale.
    #[arg(long, default_value_t = 14)]
    scale: u32,
    /// BFS searches per run (longer kernels average out scheduling noise).
    #[arg(long, default_value_t = 64)]
    keys: usize,
    /// Seconds the agents keep a run's job and bandwidth without hearing from the demo (it
    /// renews them); if throttle-ctl is killed, the links go back this long after.
    #[arg(long, default_value_t = throttle_proto::Lease::DEFAULT)]
    lease: throttle_proto::Lease,
    /// Runs per point (bandwidth and size), after one unstored warm-up run per size.
    #[arg(long, default_value_t = 3)]
    repeats: u32,
    /// Pause before each run, seconds (lets the previous run's processes go; the
    /// machine's load is measured over it). A warm-up run per size is never stored.
    #[arg(long, default_value_t = 0.2)]
    settle: f64,
    /// Bandwidth steps (percent; ranges START:STOP:STEP allowed); with the demand search
    /// the coarse pass it starts from
    /// [default: mw and pmm 100,50,25 (searched); bfs 100,40,20,14,10,7,5,3].
    #[arg(long)]
    bandwidths: Option<String>,
    /// CTI levels (percent) the demand search brackets at every size; `none` runs the
    /// plain grid of --bandwidths [default: mw and pmm 10,15,20,25; bfs none].
    #[arg(long)]
    search: Option<String>,
    /// The demand search is done at a level when the measured steps around it are at
    /// most this many points of bandwidth apart.
    #[arg(long, default_value_t = 5.0)]
    search_width: f64,
    /// CTI levels in percent [default: the --search levels, which the search measured
    /// closely; without a search 5,10,15,20,25].
    #[arg(long)]
    cti: Option<String>,
    /// Precision on request: after the search, keep measuring (more repeats around each
    /// demand) until the answer at twice the held-out size is at most this many points
    /// of bandwidth wide at every level, or --until-budget is spent; 0: no such rounds.
    #[arg(long, default_value_t = 25.0)]
    until_width: f64,
    /// The most runs the precision rounds may add.
    #[arg(long, default_value_t = 40)]
    until_budget: usize,
    /// First loopback address of the demo's agents (one per node, counting up).
    #[arg(long, default_value = "127.0.1.1")]
    base_addr: std::net::Ipv4Addr,
    /// Pin the agents to a quarter of the cores and the ranks to the rest (`local up --pin`).
    #[arg(long)]
    pin: bool,
    /// How the links are emulated: `proxy` (the agents carry every byte between nodes, on
    /// a loopback cluster) or `kernel` (namespace hosts, as root: each rank's own sockets
    /// to other nodes, paced by the kernel at the rate its agent sets, behind an egress
    /// queue on the node's link; no byte passes an agent). The two modes' answers for the
    /// same program may be compared side by side (docs/limits.md).
    #[arg(long, value_enum, default_value = "proxy")]
    links: Links,
    /// Namespace hosts (root): each node a network namespace with its own address and
    /// link, the programs' connections intercepted by the kernel (`local up --netns`);
    /// `--links kernel` implies it. With the default links: the proxy's answer on the same
    /// kind of cluster as the kernel mode's.
    #[arg(long)]
    netns: bool,
    /// Scheduling priority of the agents (`local up --agent-priority`): by default before
    /// every ordinary process, where this user may grant it (root, CAP_SYS_NICE).
    #[arg(long, default_value = "realtime", value_parser = ["normal", "high", "realtime"])]
    agent_priority: String,
    /// Print every table of the analysis (as `analyze` does), not only the bottom line,
    /// its basis and the warnings
    #[arg(long, short)]
    verbose: bool,
    /// Print the analysis as JSON at the end instead of the tables.
    #[arg(long)]
    json: bool,
    /// The problem grows with the cluster: master/worker whose volume and work grow with
    /// the processes (--mw-volume and --mw-compute per process, and 2.5 times both), a sweep
    /// per volume, and the answer in two parameters (size and volume), projected to twice
    /// the largest size on the weak-scaling line [default sizes 2,3,4,6].
    #[arg(long, conflicts_with_all = ["workload", "search", "until_width"])]
    weak: bool,
}

/// The demo's programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoWorkload {
    Mw,
    Pmm,
    Bfs,
}

impl Args {
    fn sizes_text(&self) -> &str {
        if self.weak {
            return self.sizes.as_deref().unwrap_or("2,3,4,6");
        }
        self.sizes.as_deref().unwrap_or(match self.workload {
            DemoWorkload::Pmm => "4,9,16,25",
            DemoWorkload::Bfs => "1,2,3,4",
            DemoWorkload::Mw => "2,3,4,6,8",
        })
    }

    fn capacity(&self) -> Rate {
        self.capacity.unwrap_or_else(|| {
            let text = match self.workload {
                DemoWorkload::Pmm | DemoWorkload::Mw => "100Mbit",
                DemoWorkload::Bfs => "1Gbit",
            };
            text.parse().expect("the default capacities parse")
        })
    }

    fn bandwidths(&self) -> &str {
        self.bandwidths.as_deref().unwrap_or(match self.workload {
            DemoWorkload::Pmm | DemoWorkload::Mw => "100,50,25",
            DemoWorkload::Bfs => "100,40,20,14,10,7,5,3",
        })
    }

    /// The demand search's levels, or none for the plain grid.
    fn search(&self) -> Result<Option<Search>> {
        let text = self.search.as_deref().unwrap_or(match self.workload {
            DemoWorkload::Pmm | DemoWorkload::Mw => "10,15,20,25",
            DemoWorkload::Bfs => "none",
        });
        if text == "none" {
            return Ok(None);
        }
        let search = Search {
            levels: parse_cti(text, "--search")?,
            width: self.search_width,
            max_steps: 10,
            ..Search::default()
        };
        search.check().map_err(|e| {
            anyhow::anyhow!(
                "{e} (the demo sets `levels` from --search and `width` from --search-width)"
            )
        })?;
        Ok(Some(search))
    }

    /// The sweep the demo runs, and a line saying what it sweeps.
    fn spec(&self, sizes: &[usize]) -> Result<(SweepSpec, String)> {
        let held_out = sizes.iter().copied().max().unwrap_or(1) as u32;
        let (options, what) = match self.workload {
            DemoWorkload::Pmm => (
                Options::Pmm(PmmOptions {
                    size: self.size,
                    bcast: Bcast::Binomial,
                    emulate_gflops: Some(self.emulate_gflops),
                }),
                format!(
                    "Fox PMM M={} (binomial broadcast; compute emulated at {} GFLOP/s per node: ranks sleep, the traffic is real)",
                    self.size, self.emulate_gflops
                ),
            ),
            DemoWorkload::Bfs => (
                Options::Bfs(BfsOptions {
                    scale: self.scale,
                    keys: self.keys,
                    validate: false,
                    ..BfsOptions::default()
                }),
                format!("BFS scale {}", self.scale),
            ),
            DemoWorkload::Mw => {
                let o = MwOptions {
                    volume: self.mw_volume,
                    alpha: 0.8,
                    compute_seconds: self.mw_compute,
                    // One timed iteration (after the warm-up): sleeping workers repeat
                    // to within 0.5%, and the demo's time goes to the search.
                    iterations: 1,
                    work: MwWork::Sleep,
                };
                let what = format!(
                    "master/worker, {} bytes per iteration (80% out from the master), {} s of work shared by the workers (they sleep: the traffic is real)",
                    o.volume, o.compute_seconds
                );
                (Options::Mw(o), what)
            }
        };
        let bandwidths = Steps::parse_list(self.bandwidths())
            .map_err(|e| anyhow::anyhow!("--bandwidths: {e}"))?;
        let mut spec = SweepSpec::new(options, sizes.to_vec(), bandwidths);
        spec.repeats = Repeats::Fixed(self.repeats);
        spec.settle = self.settle;
        spec.time_limit = throttle_proto::TimeLimit::from_secs(300.0)?;
        spec.seed = 1;
        // One retry: a run flagged because this machine starves 25 agents is flagged
        // again, and three tries of every such point doubled the demo's time.
        spec.retries = 1;
        spec.search = self.search()?;
        if self.until_width > 0.0 && spec.search.is_some() {
            spec.until = Some(Until {
                procs: 2 * held_out,
                width: self.until_width,
                budget: self.until_budget,
                sizes: Vec::new(),
                held_out: vec![held_out],
                levels: None,
            });
        }
        Ok((spec, what))
    }
}

/// What the demo produced.
pub struct DemoResult {
    pub analysis: Analysis,
    pub text: String,
    pub report: PathBuf,
    pub db: PathBuf,
    pub interrupted: bool,
}

impl Args {
    pub fn exec(self, _ctx: &Context) -> Exit {
        let cti = match &self.cti {
            Some(text) => parse_cti(text, "--cti")?,
            None => match self.search()? {
                Some(search) => search.levels,
                None => parse_cti("5,10,15,20,25", "--cti")?,
            },
        };
        let sizes = parse_list::<usize>(self.sizes_text(), "--sizes")?;
        let cancel = interrupt_flag()?;
        let started = std::time::Instant::now();
        if self.weak {
            let cti = match &self.cti {
                Some(text) => parse_cti(text, "--cti")?,
                None => parse_cti("10,20", "--cti")?,
            };
            let r = weak::run(&self, &sizes, &cti, cancel)?;
            if self.json {
                output::print_json(&r.analysis)?;
            } else {
                output::print(format!("\n{}", r.text))?;
            }
            crate::note!(
                "\ndemo --weak {} in {:.0} s; results {} (`throttle-ctl analyze --db {} --at-problem VALUE` answers one volume, with its report)",
                if r.interrupted { "interrupted (partial results analysed)" } else { "finished" },
                started.elapsed().as_secs_f64(),
                r.db.display(),
                shell_word(&r.db.display().to_string())
            );
            return Ok(if r.interrupted {
                ExitCode::from(130)
            } else {
                ExitCode::SUCCESS
            });
        }
        let r = run_demo(&self, &sizes, &cti, cancel)?;
        if self.json {
            output::print_json(&r.analysis)?;
        } else {
            output::print(format!("\n{}", r.text))?;
        }
        crate::note!(
            "\ndemo {} in {:.0} s; results {}, report {}",
            if r.interrupted {
                "interrupted (partial results analysed)"
            } else {
                "finished"
            },
            started.elapsed().as_secs_f64(),
            r.db.display(),
            r.report.display()
        );
        Ok(if r.interrupted {
            ExitCode::from(130)
        } else {
            ExitCode::SUCCESS
        })
    }
}

/// `s` as one word for a POSIX shell: as it is when it needs no quotes.
fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Stops the local cluster when dropped.
struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = local_cluster::down(&self.0);
    }
}

fn run_demo(
    opts: &Args,
    sizes: &[usize],
    cti: &[f64],
    cancel: &'static AtomicBool,
) -> Result<DemoResult> {
    let mut sizes = sizes.to_vec();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.len() < 4 || sizes[0] == 0 {
        anyhow::bail!("the demo needs at least 4 node counts (3 to fit, the largest held out)");
    }
    let max_nodes = *sizes.last().unwrap_or(&1);
    // Every input is checked before an earlier demo's results are moved aside.
    let nodes: Vec<String> = sizes.iter().map(|n| n.to_string()).collect();
    let (spec, what) = opts.spec(&sizes)?;
    let spec_text = toml::to_string(&spec)?;
    let mut sweep = Sweep::new(spec)?;
    let Stage {
        dir,
        db,
        capacity,
        cluster,
        _down,
    } = stage(opts, max_nodes, &spec_text)?;
    crate::note!(
        "sweeping {what} on {} nodes, {} bandwidth steps, {} repeats: {} runs{}",
        nodes.join(", "),
        sweep.steps.len(),
        opts.repeats,
        sweep.points.len(),
        search_text(sweep.spec.search.as_ref())
    );
    if let Some(w) =
        crate::load::oversubscription(&cluster, max_nodes, 1, sweep.workload.emulates_compute())
    {
        crate::note!("warning: {w}");
    }
    let store = Store::open(&db)?;
    sweep.resume_as_stored(&store)?;
    let interrupted = run_sweep(&sweep, &cluster, &store, &db, opts.lease, cancel)?;
    let held_out = max_nodes as u32;
    let (obs, chosen) = measurements::observations(&store.rows()?, TimeSource::Auto)?;
    let question = Question {
        cti: cti.to_vec(),
        predict: vec![held_out, held_out * 2],
        series: None,
        time_source: chosen.what.to_string(),
        unit: chosen.unit,
        capacity: Some(capacity.bytes_per_sec()),
        keep_flagged: false,
        keep_without_traffic: false,
        interp: Default::default(),
    };
    let mut analysis = throttle_analysis::analyze(&obs, &question)?;
    if !analysis.demand.iter().any(|d| d.procs == held_out) {
        // The held-out size could not be measured here: say why the projection could
        // not be checked against it, and what would let it.
        let why = unmeasured_held_out(&store, held_out, interrupted)?;
        let next = analysis.bottom_line.next.take();
        analysis.bottom_line.next = Some(match next {
            Some(n) => format!("{why}; {n}"),
            None => why,
        });
    }
    let cap = capacity.to_string();
    let text = if opts.verbose {
        throttle_analysis::render(&analysis, cti, Some(&cap))
    } else {
        let levels: Vec<String> = cti.iter().map(f64::to_string).collect();
        let more = format!(
            "every table (points, demand, both projections, the models, the backtest), or the demo's --verbose:\n  throttle-ctl analyze --db {} --predict {},{} --cti {}",
            shell_word(&db.display().to_string()),
            held_out,
            held_out * 2,
            levels.join(",")
        );
        throttle_analysis::render::summary(&analysis, cti, Some(&cap), &more)
    };
    let report = report::write(&dir.join("report"), &analysis, cti, Some(&cap))?;
    Ok(DemoResult {
        analysis,
        text,
        report,
        db,
        interrupted,
    })
}

/// A demo's directory made ready and its cluster up: where it writes, the results
/// database, the links' capacity, the cluster, and what takes the cluster down.
struct Stage {
    dir: PathBuf,
    db: PathBuf,
    capacity: Rate,
    cluster: Cluster,
    _down: Down,
}

/// Make the demo's directory ready (an earlier demo's results moved aside), start
/// `max_nodes` agents and write the sweep's spec `spec_text` beside its results.
fn stage(opts: &Args, max_nodes: usize, spec_text: &str) -> Result<Stage> {
    if opts.links == Links::Kernel && !nix::unistd::geteuid().is_root() {
        anyhow::bail!("--links kernel runs the demo on namespace hosts, which need root (network namespaces, veth links, each node's egress queue): run it as root, or leave --links at proxy, where the agents carry the links on a loopback cluster");
    }
    if opts.netns && !nix::unistd::geteuid().is_root() {
        anyhow::bail!("--netns runs the demo on namespace hosts, which need root (network namespaces, veth links, nftables): run it as root, or without --netns on a loopback cluster");
    }
    // A directory of this user's that nobody else may write (a link in its place, or
    // another user's directory, is refused): what the demo writes there cannot be
    // redirected.
    let demo_dir = crate::shared_dir::out_dir(&opts.dir)
        .map_err(|e| anyhow::anyhow!("the demo's directory: {e:#}"))?;
    let dir = demo_dir.real_path()?;
    let cluster_path = dir.join("throttle-cluster.toml");
    let _ = local_cluster::down(&cluster_path);
    let db = dir.join("results.db");
    if let Some(kept) = keep_earlier_results(&db)? {
        crate::note!(
            "an earlier demo's results are kept as {} (this one writes {})",
            kept.display(),
            db.display()
        );
    }
    let capacity = opts.capacity();
    start_cluster(opts, &dir, &cluster_path, max_nodes, capacity)?;
    let down = Down(cluster_path.clone());
    let cluster = Cluster::load(&cluster_path)?;
    demo_dir.write_atomically("sweep.toml", spec_text.as_bytes(), 0o666)?;
    Ok(Stage {
        dir,
        db,
        capacity,
        cluster,
        _down: down,
    })
}

/// Move an earlier demo's results at `db` aside (with their journal files), named after
/// when they were last written: `results-20261127T204300Z.db`. Returns the new name, or
/// `None` when there were none. A demo never deletes measurements.
fn keep_earlier_results(db: &Path) -> Result<Option<PathBuf>> {
    let with = |p: &Path, ext: &str| {
        let mut name = p.as_os_str().to_owned();
        name.push(ext);
        PathBuf::from(name)
    };
    let Ok(meta) = std::fs::symlink_metadata(db) else {
        // Journals without their database hold no results, and must not be read as the
        // new store's.
        for ext in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(with(db, ext));
        }
        return Ok(None);
    };
    let when = meta
        .modified()
        .ok()
        .and_then(|t| jiff::Timestamp::try_from(t).ok())
        .map(|t| t.strftime("%Y%m%dT%H%M%SZ").to_string())
        .unwrap_or_else(|| "earlier".into());
    let dir = db.parent().unwrap_or(Path::new("."));
    let kept = (1..1000)
        .map(|n| match n {
            1 => dir.join(format!("results-{when}.db")),
            n => dir.join(format!("results-{when}-{n}.db")),
        })
        .find(|p| {
            ["", "-wal", "-shm"]
                .iter()
                .all(|ext| std::fs::symlink_metadata(with(p, ext)).is_err())
        })
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no free name beside {} to keep the earlier results",
                db.display()
            )
        })?;
    for ext in ["", "-wal", "-shm"] {
        let from = with(db, ext);
        if std::fs::symlink_metadata(&from).is_ok() {
            std::fs::rename(&from, with(&kept, ext)).with_context(|| {
                format!("cannot keep the earlier results {} aside", from.display())
            })?;
        }
    }
    Ok(Some(kept))
}

/// Start the demo's local cluster: `nodes` agents at `capacity`, their state in `dir`,
/// its cluster file at `cluster_path`.
fn start_cluster(
    opts: &Args,
    dir: &Path,
    cluster_path: &Path,
    nodes: usize,
    capacity: Rate,
) -> Result<()> {
    let kernel = opts.links == Links::Kernel;
    let netns = opts.netns || kernel;
    let hosts = if netns { "namespace hosts" } else { "agents" };
    let links = if kernel {
        "kernel-paced links (the ranks' own sockets, no agent on the data path)"
    } else {
        "links through the agents (proxy mode)"
    };
    crate::note!("starting {nodes} {hosts} at {capacity} each, {links} ...");
    let mut agent_args: Vec<String> = vec!["--threads".into(), "1".into()];
    let mut rank_cpus = None;
    if opts.pin {
        let (args, ranks) = local_cluster::pin_args()?;
        agent_args.extend(args);
        rank_cpus = Some(ranks);
    }
    let up = LocalUp {
        nodes,
        capacity,
        base_addr: opts.base_addr,
        dir: dir.join("state"),
        priority: opts.agent_priority.clone(),
        agent_args,
        rank_cpus,
        tls: false,
        // Throttle's own ranks connect to each other directly only behind the egress
        // queue of a namespace host's link (decision 0050).
        netns: netns.then_some(None),
        intercept: if kernel {
            crate::intercept::Mode::Preload
        } else {
            crate::intercept::Mode::Kernel
        },
        kernel_links: kernel,
    };
    local_cluster::up(&up, cluster_path)?;
    Ok(())
}

/// The demand search the sweep goes on with, in words (empty without one).
fn search_text(search: Option<&Search>) -> String {
    match search {
        Some(s) => format!(
            ", then a demand search: more steps until CTI {} each lie between steps at most {} points apart (at most {} more steps per size)",
            s.levels.iter().map(|l| format!("{l}%")).collect::<Vec<_>>().join(", "),
            s.width,
            s.max_steps
        ),
        None => String::new(),
    }
}

/// Run the demo's sweep with a progress display, storing into `store` (the database at
/// `db`); whether it was interrupted.
fn run_sweep(
    sweep: &Sweep,
    cluster: &Cluster,
    store: &Store,
    db: &Path,
    lease: throttle_proto::Lease,
    cancel: &'static AtomicBool,
) -> Result<bool> {
    let options = sweep::SweepOptions {
        job_prefix: sweep::job_prefix(db, &sweep.series),
        lease,
        fail_fast: false,
        ignore_failure: false,
        retry_given_up: false,
    };
    // A closed output (`demo 2>&1 | head`) stops it as Ctrl-C does.
    let mut progress = SweepProgress::new(false).stop_on_closed_output(cancel);
    let end = sweep.execute(cluster, store, &options, cancel, |e| progress.event(e));
    progress.finish();
    Ok(matches!(end?, SweepEnd::Interrupted { .. }))
}

/// Why no projection was checked against the held-out size (`held_out` nodes), which has
/// no demand measured: its runs were flagged (this machine cannot emulate it), or too few
/// are stored.
fn unmeasured_held_out(store: &Store, held_out: u32, interrupted: bool) -> Result<String> {
    let rows = store.rows()?;
    let mine: Vec<_> = rows.iter().filter(|r| r.nodes == held_out).collect();
    let flagged = mine.iter().filter(|r| r.flag.is_some()).count();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(if flagged > 0 {
        format!(
            "the held-out size, {held_out} nodes, has no good run here ({flagged} of its {} runs flagged: its links did not run at their setting, {held_out} agents and {held_out} ranks on {cores} cores), so no projection was checked against it; run the demo where every agent and rank has a core, or end --sizes at a size this machine can emulate",
            mine.len()
        )
    } else {
        format!(
            "the held-out size, {held_out} nodes, has no demand measured ({} runs stored{}), so no projection was checked against it",
            mine.len(),
            if interrupted { "; the demo was interrupted" } else { "" }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second demo in the same directory keeps the first one's results (before, it
    /// deleted them: 11 runs became 3), journal files with them, under a free name.
    #[test]
    fn an_earlier_demos_results_are_kept_aside() {
        let dir = std::env::temp_dir().join(format!("throttle-demo-keep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let db = dir.join("results.db");
        // Journals left without their database go.
        std::fs::write(dir.join("results.db-shm"), b"stray").unwrap();
        assert_eq!(keep_earlier_results(&db).unwrap(), None);
        assert!(!dir.join("results.db-shm").exists());
        std::fs::write(&db, b"first").unwrap();
        std::fs::write(dir.join("results.db-wal"), b"first's journal").unwrap();
        let first = keep_earlier_results(&db).unwrap().unwrap();
        assert!(!db.exists() && !dir.join("results.db-wal").exists());
        assert_eq!(std::fs::read(&first).unwrap(), b"first");
        let journal = PathBuf::from(format!("{}-wal", first.display()));
        assert_eq!(std::fs::read(journal).unwrap(), b"first's journal");
        let name = first.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("results-2") && name.ends_with("Z.db"),
            "{name}"
        );
        // Written in the same second: the next free name.
        std::fs::write(&db, b"second").unwrap();
        let second = keep_earlier_results(&db).unwrap().unwrap();
        assert_ne!(second, first);
        assert_eq!(std::fs::read(&first).unwrap(), b"first");
        assert_eq!(std::fs::read(&second).unwrap(), b"second");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
