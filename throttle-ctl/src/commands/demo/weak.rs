//! `throttle-ctl demo --weak`: the problem axis on a local emulated cluster, in a few
//! minutes. The master/worker program grows with the cluster: its volume and work grow in
//! proportion to the processes (weak scaling), on two lines, `--mw-volume` and 2.5 times it per
//! process, so that the problem's size is not tied to the node count and the model can
//! tell the two apart. One sweep per volume (docs/sweeps.md, "A second parameter"),
//! then the answer in both parameters: the demand at every (size, volume), the model's
//! backtest holding out the largest size, the largest volume and both, the projection to
//! twice the largest size on the first line, and where the link saturates along it.

use std::sync::atomic::AtomicBool;

use anyhow::Result;
use throttle_analysis::analyze::problem::{self, ProblemQuestion};
use throttle_analysis::answer::problem::ProblemAnalysis;
use throttle_analysis::Question;
use throttle_proto::workload::{MwOptions, MwWork, Options};

use super::{run_sweep, stage, Args, Stage};
use crate::measurements::{self, TimeSource};
use crate::store::Store;
use crate::sweep::problem::Problem;
use crate::sweep::steps::Steps;
use crate::sweep::{Repeats, Sweep, SweepSpec};

/// The bandwidth steps of the weak demo: a plain grid, fine enough to read CTI 10% and
/// 20% between steps (no demand search: it would search every volume apart).
const STEPS: &str = "100,60,40,25,15";

/// What the weak demo produced.
pub struct WeakResult {
    pub analysis: ProblemAnalysis,
    pub text: String,
    pub db: std::path::PathBuf,
    pub interrupted: bool,
}

/// The spec: master/worker at `sizes`, each at p x the volume per process, and at 2.5
/// times that.
fn spec(opts: &Args, sizes: &[usize]) -> Result<SweepSpec> {
    let per_proc = opts.mw_volume;
    let base = MwOptions {
        volume: per_proc,
        alpha: 0.8,
        // The work of one process's volume: the work grows with the volume.
        compute_seconds: opts.mw_compute,
        iterations: 1,
        work: MwWork::Sleep,
    };
    let bandwidths = Steps::parse_list(opts.bandwidths.as_deref().unwrap_or(STEPS))
        .map_err(|e| anyhow::anyhow!("--bandwidths: {e}"))?;
    let mut spec = SweepSpec::new(Options::Mw(base), sizes.to_vec(), bandwidths);
    let mut pairs = Vec::new();
    for &p in sizes {
        // The second line at 2.5 x the first: its volume meets the first line's at twice
        // the largest size (the (P, N) projected to, whose measured problem would be held
        // out) only where 0.8 x the largest size is measured too (the default sizes: never).
        let line = per_proc
            .checked_mul(p as u64)
            .and_then(|v| v.checked_mul(5).map(|five| (v, five / 2)))
            .ok_or_else(|| anyhow::anyhow!("--mw-volume {per_proc} x {p} nodes overflows"))?;
        pairs.push((p, line.0));
        pairs.push((p, line.1));
    }
    spec.problem = Some(Problem {
        pairs,
        ..Problem::default()
    });
    spec.name = Some("demo weak mw".into());
    spec.repeats = Repeats::Fixed(opts.repeats);
    spec.settle = opts.settle;
    spec.time_limit = throttle_proto::TimeLimit::from_secs(300.0)?;
    spec.seed = 1;
    spec.retries = 1;
    Ok(spec)
}

/// Run the weak demo in `opts.dir` at `sizes`, the analysis at `cti`.
pub fn run(
    opts: &Args,
    sizes: &[usize],
    cti: &[f64],
    cancel: &'static AtomicBool,
) -> Result<WeakResult> {
    let mut sizes = sizes.to_vec();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.len() < 3 || sizes[0] < 2 {
        anyhow::bail!("the weak demo needs at least 3 node counts of 2 or more (a master and a worker): the largest is held out by its backtest");
    }
    let max_nodes = *sizes.last().unwrap_or(&2);
    let spec = spec(opts, &sizes)?;
    let spec_text = toml::to_string(&spec)?;
    let mut sweeps = Sweep::plan(spec)?;
    let Stage {
        db,
        capacity,
        cluster,
        _down,
        ..
    } = stage(opts, max_nodes, &spec_text)?;
    let runs: usize = sweeps.iter().map(|s| s.points.len()).sum();
    crate::note!(
        "sweeping master/worker with {} bytes and {} s of work per process (and 2.5 times both) on {} nodes: {} volumes, {} bandwidth steps, {} repeats: {runs} runs",
        opts.mw_volume,
        opts.mw_compute,
        sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(", "),
        sweeps.len(),
        sweeps[0].steps.len(),
        opts.repeats
    );
    let store = Store::open(&db)?;
    let mut interrupted = false;
    for sweep in &mut sweeps {
        sweep.resume_as_stored(&store)?;
        if run_sweep(sweep, &cluster, &store, &db, opts.lease, cancel)? {
            interrupted = true;
            break;
        }
    }
    let (obs, chosen) = measurements::observations(&store.rows()?, TimeSource::Auto)?;
    let target = 2 * max_nodes as u32;
    let question = Question {
        cti: cti.to_vec(),
        predict: vec![target],
        series: None,
        time_source: chosen.what.to_string(),
        unit: chosen.unit,
        capacity: Some(capacity.bytes_per_sec()),
        keep_flagged: false,
        keep_without_traffic: false,
        interp: Default::default(),
    };
    let asked = ProblemQuestion {
        axis: crate::sweep::problem::axis("mw"),
        // The first line, volume = --mw-volume x p, at the size projected to; the link's
        // saturation along it.
        problems: vec![opts.mw_volume as f64 * target as f64],
        weak: Some(opts.mw_volume as f64),
    };
    let analysis = problem::analyze_problem(&obs, &question, &asked)?;
    let cap = capacity.to_string();
    let text = throttle_analysis::render::problem::render(&analysis, Some(&cap), opts.verbose);
    Ok(WeakResult {
        analysis,
        text,
        db,
        interrupted,
    })
}
