//! A checked sweep: the workload made and checked for every node count, the series name,
//! every point with its stable key in a seeded random order, and, under
//! `repeats = "auto"`, the next round of repeats from what is stored.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use throttle_analysis::method::noise;
use throttle_analysis::method::stats::Rng;
use throttle_analysis::table::printable;
use throttle_proto::emulation;
use throttle_proto::workload::{Options, PmmOptions};
use throttle_proto::Pct;

use super::problem;
use super::spec::{Repeats, SweepSpec, AUTO_FIRST};
use crate::store::Store;
use crate::workload::Workload;

/// One point of the sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPoint {
    pub nodes: usize,
    pub bw: Pct,
    /// The added one-way latency of a latency point (`latencies` in the spec: at 100% of
    /// the link); `None` for a bandwidth point.
    pub latency_us: Option<u64>,
    pub repeat: u32,
    /// Identifies the point across runs of the sweep (series, nodes, ranks per node,
    /// bandwidth, repeat), so a resumed sweep knows what is stored.
    pub key: String,
}

impl SweepPoint {
    /// The key prefix of one node count's points of a series (every bandwidth).
    pub fn size_prefix(series: &str, nodes: usize, ranks_per_node: usize) -> String {
        format!("{series}|nodes={nodes}|rpn={ranks_per_node}|bw=")
    }

    pub fn new(series: &str, nodes: usize, ranks_per_node: usize, bw: Pct, repeat: u32) -> Self {
        SweepPoint {
            nodes,
            bw,
            latency_us: None,
            repeat,
            key: format!(
                "{}rep={repeat}",
                Self::group(series, nodes, ranks_per_node, bw)
            ),
        }
    }

    /// A latency point: the full link with `latency_us` added one way.
    pub fn at_latency(
        series: &str,
        nodes: usize,
        ranks_per_node: usize,
        latency_us: u64,
        repeat: u32,
    ) -> Self {
        SweepPoint {
            nodes,
            bw: Pct::FULL,
            latency_us: Some(latency_us),
            repeat,
            key: format!(
                "{series}|nodes={nodes}|rpn={ranks_per_node}|lat={latency_us}|rep={repeat}"
            ),
        }
    }

    /// The same point under the key prefix `series`.
    pub fn rekeyed(&self, series: &str, ranks_per_node: usize) -> SweepPoint {
        match self.latency_us {
            Some(l) => Self::at_latency(series, self.nodes, ranks_per_node, l, self.repeat),
            None => Self::new(series, self.nodes, ranks_per_node, self.bw, self.repeat),
        }
    }

    /// What the point sets, in words: `bw=40%`, or `lat=50us` (at 100%).
    pub fn setting(&self) -> String {
        match self.latency_us {
            Some(l) => format!("lat={l}us"),
            None => format!("bw={}", self.bw),
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

/// A series named after its workload and options: `command run="..." time_regex="..."`
/// (given [`options_set`]), or with every option, unset ones as `key=null`, as throttle
/// wrote it until 2026-11-27.
fn default_series(workload: &str, options: &serde_json::Value) -> String {
    let parts: Vec<String> = options
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
        .unwrap_or_default();
    format!("{workload} {}", parts.join(" "))
}

/// A workload's options without the unset ones (`null`): what tells two sweeps apart.
fn options_set(options: &serde_json::Value) -> serde_json::Value {
    match options {
        serde_json::Value::Object(m) => serde_json::Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The longest series name a spec may give.
const MAX_NAME: usize = 80;

/// A spec's `name`, checked: printable, short, and without the point keys' separator.
fn series_name(name: &str) -> Result<String> {
    let trimmed = name.trim();
    if trimmed.is_empty() || trimmed.chars().count() > MAX_NAME {
        bail!("`name` must be 1 to {MAX_NAME} characters");
    }
    if trimmed
        .chars()
        .any(|c| throttle_analysis::table::unsafe_char(c) || c == '|')
    {
        bail!("`name` must not contain control characters, bidirectional controls or `|`");
    }
    Ok(trimmed.to_string())
}

/// A parsed, checked sweep.
pub struct Sweep {
    pub spec: SweepSpec,
    pub workload: Workload,
    pub series: String,
    /// The problem value this sweep measures, when the spec has a problem axis (one
    /// sweep per value, all under one series).
    pub problem: Option<u64>,
    /// What its points' keys begin with: the series, and the problem value when there is
    /// one.
    pub(super) key_base: String,
    /// The name earlier versions gave the same sweep, where it differs (see
    /// [`Sweep::resume_as_stored`]).
    legacy_series: Option<String>,
    pub options: serde_json::Value,
    /// The spec's bandwidth steps, expanded.
    pub steps: Vec<Pct>,
    pub points: Vec<SweepPoint>,
}

/// The most runs of a point (`repeats`, `max_repeats`).
const MAX_COUNT: u32 = 10_000;
/// The most extra attempts of a failed or flagged point (`retries`).
const MAX_RETRIES: u32 = 100;

impl Sweep {
    /// The sweeps of the spec at `path`: one, or one per problem value ([`Sweep::plan`]).
    pub fn load(path: &Path) -> Result<Vec<Sweep>> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the sweep spec {}", path.display()))?;
        let spec: SweepSpec = toml::from_str(&text)
            .map_err(|e| anyhow!("the sweep spec {} is not valid: {e}", path.display()))?;
        Sweep::plan(spec)
    }

    /// The sweeps of `spec`: itself without a problem axis; with one, a sweep per value
    /// at the node counts it is measured at, every one under the series the spec names
    /// (or its workload and options with the problem's option as `{n}`).
    pub fn plan(spec: SweepSpec) -> Result<Vec<Sweep>> {
        let Some(axis) = spec.problem.clone() else {
            return Ok(vec![Sweep::new(spec)?]);
        };
        if spec.nodes.is_empty() || spec.nodes.contains(&0) {
            bail!("`nodes` must list node counts >= 1");
        }
        if spec.until.is_some() {
            bail!("[until] and [problem] do not go together yet: [until] narrows the answer at one size of one problem (sweep each value with its own [until] and `name`)");
        }
        let cells = axis.cells(&spec.nodes, spec.ranks_per_node)?;
        {
            use throttle_analysis::analyze::problem::{MAX_CELLS, MAX_SIZES};
            let nodes: std::collections::BTreeSet<usize> =
                cells.iter().flat_map(|c| c.nodes.iter().copied()).collect();
            let cell_count: usize = cells.iter().map(|c| c.nodes.len()).sum();
            if nodes.len() > MAX_SIZES || cell_count > MAX_CELLS {
                bail!(
                    "this sweep measures {} node counts in {cell_count} (nodes, problem) cells; `analyze` takes at most {MAX_SIZES} node counts and {MAX_CELLS} cells with a problem axis (its time grows with both): sweep fewer, or split the axis into sweeps with their own `name`",
                    nodes.len()
                );
            }
        }
        let base = spec.options()?;
        let series = match &spec.name {
            Some(name) => series_name(name)?,
            None => default_series(base.name(), &options_set(&problem::named(&base)?)),
        };
        let mut sweeps = Vec::new();
        for cell in cells {
            let mut one = spec.clone();
            one.problem = None;
            one.name = None;
            one.nodes = cell.nodes;
            one.set_options(problem::apply(&base, cell.value)?);
            let mut sweep =
                Sweep::new(one).with_context(|| format!("at problem value {}", cell.value))?;
            sweep.spec.problem = spec.problem.clone();
            sweep.spec.name = spec.name.clone();
            sweep.series = series.clone();
            sweep.problem = Some(cell.value);
            sweep.legacy_series = None;
            sweep.key_base = format!("{series}|n={}", cell.value);
            let rpn = sweep.spec.ranks_per_node;
            for p in &mut sweep.points {
                *p = p.rekeyed(&sweep.key_base, rpn);
            }
            sweeps.push(sweep);
        }
        Ok(sweeps)
    }

    /// A sweep of `spec`, which has no problem axis ([`Sweep::plan`] takes one).
    pub fn new(spec: SweepSpec) -> Result<Sweep> {
        if spec.problem.is_some() {
            bail!("a spec with a [problem] is one sweep per value: Sweep::plan makes them");
        }
        let workload = Workload::new(spec.options()?)?;
        let options = workload.options().to_json();
        if spec.nodes.is_empty() || spec.nodes.contains(&0) {
            bail!("`nodes` must list node counts >= 1");
        }
        if spec.nodes.len() > throttle_analysis::analyze::MAX_SIZES {
            bail!(
                "`nodes` lists {} node counts; `analyze` takes at most {} (its time grows with them): sweep fewer, or split them into sweeps with their own `name`",
                spec.nodes.len(),
                throttle_analysis::analyze::MAX_SIZES
            );
        }
        // Every count bounded as `repeats` is (a spec is a file anyone may hand over: a
        // count of 4294967295 is a sweep without end), whether or not it is used.
        if spec.repeats == Repeats::Auto && spec.max_repeats < AUTO_FIRST {
            bail!(
                "`max_repeats` must be at least {AUTO_FIRST} (the repeats every point gets first)"
            );
        }
        if spec.max_repeats > MAX_COUNT {
            bail!("`max_repeats` must be at most {MAX_COUNT}");
        }
        if spec.retries > MAX_RETRIES {
            bail!("`retries` must be at most {MAX_RETRIES} (more attempts for a failed or flagged point)");
        }
        if !(spec.precision.is_finite() && spec.precision > 0.0 && spec.precision < 1.0) {
            bail!("`precision` must be a share between 0 and 1 (0.02 for +-2%)");
        }
        if !(spec.settle.is_finite() && (0.0..=600.0).contains(&spec.settle)) {
            bail!("`settle` must be between 0 and 600 seconds");
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
                if s > spec.time_limit.secs() {
                    bail!(
                        "at {n} node(s) the emulated compute alone takes {s:.1} s per run (size {size} at {g} GFLOP/s), more than `time_limit` = {} s: raise `emulate_gflops` or `time_limit`, or lower `size`",
                        spec.time_limit.secs()
                    );
                }
            }
        }
        let bws = spec.bandwidths.as_slice().to_vec();
        if let Some(u) = &spec.until {
            u.check(&spec.nodes)?;
            if !spec.bandwidths.has_full() {
                bail!("`bandwidths` has no 100% step: [until] narrows an answer measured against the 100% baseline, add 100");
            }
            for &n in &u.sizes {
                workload
                    .check_procs(n * spec.ranks_per_node)
                    .map_err(|e| anyhow!("[until] `sizes`: at {n} node(s): {e}"))?;
            }
        }
        if let Some(s) = &spec.search {
            s.check()?;
            if !spec.bandwidths.has_full() {
                bail!("`bandwidths` has no 100% step: a [search] measures every CTI against the 100% baseline, add 100");
            }
        }
        // The series is the workload and the options it was given (not the ones left
        // unset); until 2026-11-27 unset ones were written as `key=null`: that name is kept to
        // resume a store an earlier throttle wrote ([`Sweep::resume_as_stored`]).
        let (series, legacy_series) = match &spec.name {
            Some(name) => (series_name(name)?, None),
            None => (
                default_series(workload.name(), &options_set(&options)),
                Some(default_series(workload.name(), &options)),
            ),
        };
        let legacy_series = legacy_series.filter(|l| *l != series);
        let mut points = Vec::new();
        for &n in &spec.nodes {
            for bw in &bws {
                // Every demand a search measures at a size is relative to its baseline:
                // the baseline gets twice the repeats (with 3, one slow run moved a
                // 16-node baseline by 2% and every demand of that size by 2-6 points).
                let repeats = match spec.search {
                    Some(_) if *bw == Pct::FULL => 2 * spec.repeats.first(),
                    _ => spec.repeats.first(),
                };
                for r in 0..repeats {
                    points.push(SweepPoint::new(&series, n, spec.ranks_per_node, *bw, r));
                }
            }
        }
        // Latency points: the full link with each added latency, the 0 baseline with the
        // doubled repeats every level's latency is read against.
        check_latencies(&spec.latencies)?;
        for &n in &spec.nodes {
            for &l in &spec.latencies {
                let repeats = if l == 0 {
                    2 * spec.repeats.first()
                } else {
                    spec.repeats.first()
                };
                for r in 0..repeats {
                    points.push(SweepPoint::at_latency(
                        &series,
                        n,
                        spec.ranks_per_node,
                        l,
                        r,
                    ));
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
            key_base: series.clone(),
            series,
            problem: None,
            legacy_series,
            options,
            steps: bws,
            points,
        })
    }
}

impl Sweep {
    /// Match the sweep with what `store` holds of it. A store an earlier throttle wrote
    /// under this sweep's older name (unset options written as `key=null`), and nothing
    /// under the current one, is resumed under that name, so that what is stored counts.
    /// A store whose runs of this series are of another workload or other options (a
    /// `name` kept for a changed sweep) is refused: its points would count as done.
    pub fn resume_as_stored(&mut self, store: &Store) -> Result<()> {
        if let Some(legacy) = &self.legacy_series {
            if store.has_series(legacy)? && !store.has_series(&self.series)? {
                self.series = legacy.clone();
                self.key_base = legacy.clone();
                let rpn = self.spec.ranks_per_node;
                for p in &mut self.points {
                    *p = p.rekeyed(&self.key_base, rpn);
                }
            }
        }
        // One series is swept with a problem axis or without one, never both: the analysis
        // refuses a series that mixes them, after the sweep's time was spent.
        let (with, without) = store.problem_kinds(&self.series)?;
        if (self.problem.is_some() && without) || (self.problem.is_none() && with) {
            bail!(
                "the store already holds runs of series `{}` {} a problem value: a series is swept with a [problem] or without one; give this sweep its own `name`, or use another --db",
                printable(&self.series),
                if without { "without" } else { "with" }
            );
        }
        // Options compared as set: a store from before an option existed is the same sweep.
        let mine = options_set(&self.options);
        if let Some((workload, options)) = store
            .settings_of(&self.series, self.problem)?
            .into_iter()
            .find(|(w, o)| {
                w != self.workload.name()
                    || serde_json::from_str(o)
                        .map(|o| options_set(&o))
                        .ok()
                        .as_ref()
                        != Some(&mine)
            })
        {
            bail!(
                "the store already holds runs of series `{}` with other settings ({workload} {}): give this sweep its own `name`, or use another --db",
                printable(&self.series),
                printable(&options)
            );
        }
        Ok(())
    }

    /// Under `repeats = "auto"`: the next repeat of every point whose median is not yet
    /// within `precision` and that has repeats left, in a seeded shuffled order.
    /// `searched`: the points the demand search added, whose steps are repeated alike.
    pub fn more_repeats(
        &self,
        store: &Store,
        failed: &HashMap<String, u32>,
        searched: &[SweepPoint],
    ) -> Result<Vec<SweepPoint>> {
        let rows = store.rows()?;
        let mut groups: Vec<(usize, Pct)> = Vec::new();
        // Latency points keep the repeats the spec gives them.
        for p in self
            .points
            .iter()
            .chain(searched)
            .filter(|p| p.latency_us.is_none())
        {
            if !groups.contains(&(p.nodes, p.bw)) {
                groups.push((p.nodes, p.bw));
            }
        }
        let mut more = Vec::new();
        for (nodes, bw) in groups {
            let prefix = SweepPoint::group(&self.key_base, nodes, self.spec.ranks_per_node, bw);
            let mine: Vec<_> = rows
                .iter()
                .filter(|r| r.point_key.starts_with(&prefix))
                .collect();
            let times: Vec<f64> = mine
                .iter()
                .filter(|r| r.good())
                .filter_map(|r| r.kernel_seconds.or(r.seconds))
                .collect();
            let max = if bw == Pct::FULL {
                2 * self.spec.max_repeats
            } else {
                self.spec.max_repeats
            };
            if times.len() as u32 >= max || noise::median_precision(&times) <= self.spec.precision {
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
            let p = SweepPoint::new(&self.key_base, nodes, self.spec.ranks_per_node, bw, next);
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

/// The most latency steps of a spec.
const MAX_LATENCIES: usize = 32;

/// A spec's `latencies`, checked: none, or 0 (the baseline) and more, each at most the
/// largest latency a link takes, at most [`MAX_LATENCIES`] of them, no one twice.
fn check_latencies(latencies: &[u64]) -> Result<()> {
    if latencies.is_empty() {
        return Ok(());
    }
    if !latencies.contains(&0) {
        bail!("`latencies` needs 0: every latency's CTI is measured against the run without added latency");
    }
    if latencies.len() < 2 {
        bail!("`latencies` needs a latency besides 0 (e.g. [0, 50, 200, 1000])");
    }
    if latencies.len() > MAX_LATENCIES {
        bail!(
            "`latencies` lists {} steps; a spec takes at most {MAX_LATENCIES}",
            latencies.len()
        );
    }
    let max = throttle_proto::shape::MAX_LATENCY_US;
    if let Some(l) = latencies.iter().find(|l| **l > max) {
        bail!("`latencies`: {l} us is more than a link adds ({max} us)");
    }
    let mut seen = latencies.to_vec();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() != latencies.len() {
        bail!("`latencies` lists a step twice");
    }
    Ok(())
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
    use crate::run_status::RunStatus;
    use crate::store::RunRow;

    #[test]
    fn a_spec_may_name_its_series() {
        let spec = |name: &str| {
            format!(
                "workload = \"command\"\nname = {name}\nnodes = [2]\nbandwidths = [100, 50]\n\
                 [command]\nrun = \"mpirun --mca btl tcp,self --hostfile {{hostfile}} -np {{procs}} ./IMB-MPI1 Allreduce\"\n"
            )
        };
        let named = Sweep::new(toml::from_str(&spec("\"imb-allreduce\"")).unwrap()).unwrap();
        assert_eq!(named.series, "imb-allreduce");
        assert!(
            named.points[0].key.starts_with("imb-allreduce|nodes=2|"),
            "{}",
            named.points[0].key
        );
        for bad in [
            "\"\"",
            "\"a|b\"",
            "\"bell\\u0007\"",
            &format!("\"{}\"", "x".repeat(81)),
        ] {
            let e = Sweep::new(toml::from_str(&spec(bad)).unwrap())
                .err()
                .map(|e| e.to_string());
            assert!(
                e.as_deref().is_some_and(|e| e.contains("`name`")),
                "{bad}: {e:?}"
            );
        }
    }

    #[test]
    fn unset_options_stay_out_of_the_series_and_older_stores_resume() {
        let text = "workload = \"command\"\nnodes = [2]\nbandwidths = [100, 50]\n\
                    [command]\nrun = \"./app {procs}\"\ntime_regex = 't=([0-9.]+)'\n";
        let mut sweep = Sweep::new(toml::from_str(text).unwrap()).unwrap();
        assert_eq!(
            sweep.series,
            r#"command run="./app {procs}" time_regex="t=([0-9.]+)""#
        );
        let legacy = r#"command intercept=null rate_regex=null run="./app {procs}" time_regex="t=([0-9.]+)""#;
        // A store an earlier throttle wrote under the old name: the sweep takes it.
        let path =
            crate::store::test_dir().join(format!("throttle-legacy-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let store = crate::store::Store::open(&path).unwrap();
        let key = SweepPoint::new(legacy, 2, 1, Pct::FULL, 0).key;
        let mut row = RunRow::for_test(&key, legacy, Pct::FULL, 0);
        row.workload = "command".into();
        row.options = sweep.options.to_string();
        store.insert(&row).unwrap();
        sweep.resume_as_stored(&store).unwrap();
        assert_eq!(sweep.series, legacy);
        assert!(
            sweep.points.iter().any(|p| p.key == row.point_key),
            "{:?}",
            sweep.points
        );
        // A store that holds the new name (or nothing of this sweep) keeps it.
        let mut fresh = Sweep::new(toml::from_str(text).unwrap()).unwrap();
        row.series = fresh.series.clone();
        store.insert(&row).unwrap();
        fresh.resume_as_stored(&store).unwrap();
        assert!(!fresh.series.contains("null"), "{}", fresh.series);
        // A name kept for another command: refused, its points would count as done.
        let named = |run: &str| {
            let t = format!("workload = \"command\"\nname = \"app\"\nnodes = [2]\nbandwidths = [100]\n[command]\nrun = \"{run}\"\n");
            Sweep::new(toml::from_str(&t).unwrap()).unwrap()
        };
        let first = named("./app-1");
        row.series = "app".into();
        row.options = first.options.to_string();
        store.insert(&row).unwrap();
        named("./app-1").resume_as_stored(&store).unwrap();
        let e = named("./app-2")
            .resume_as_stored(&store)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("series `app` with other settings") && e.contains("app-1"),
            "{e}"
        );
        let _ = std::fs::remove_file(&path);
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
        let path =
            crate::store::test_dir().join(format!("throttle-auto-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let store = Store::open(&path).unwrap();
        let put = |p: &SweepPoint, seconds: f64, status: RunStatus| {
            store
                .insert(&RunRow {
                    seconds: (status == RunStatus::Ok).then_some(seconds),
                    status,
                    ..RunRow::for_test(&p.key, &sweep.series, p.bw, p.repeat)
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
        let more = sweep.more_repeats(&store, &failed, &[]).unwrap();
        assert_eq!(more.len(), 1, "{more:?}");
        assert_eq!((more[0].bw, more[0].repeat), (Pct::FULL, 3));
        // The baseline may go to 2 x max_repeats = 8; a failed repeat is skipped over.
        put(&more[0], 1.0, RunStatus::Failed);
        put(
            &SweepPoint::new(&sweep.series, 1, 1, Pct::FULL, 4),
            1.0,
            RunStatus::Ok,
        );
        let more = sweep.more_repeats(&store, &failed, &[]).unwrap();
        assert_eq!(more[0].repeat, 5);
        for r in 5..8 {
            put(
                &SweepPoint::new(&sweep.series, 1, 1, Pct::FULL, r),
                1.0 + (r % 2) as f64 * 0.2,
                RunStatus::Ok,
            );
        }
        // 7 good runs at 100%: still imprecise, one more allowed.
        assert_eq!(sweep.more_repeats(&store, &failed, &[]).unwrap().len(), 1);
        // Unless a repeat of it was given up: then none (not one more each round).
        let gave_up = HashMap::from([(more[0].key.clone(), sweep.spec.retries + 1)]);
        assert!(sweep
            .more_repeats(&store, &gave_up, &[])
            .unwrap()
            .is_empty());
        put(
            &SweepPoint::new(&sweep.series, 1, 1, Pct::FULL, 8),
            1.2,
            RunStatus::Ok,
        );
        assert!(sweep.more_repeats(&store, &failed, &[]).unwrap().is_empty());
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn the_key_prefix_covers_every_bandwidth_of_a_size_and_no_other_size() {
        let p = SweepPoint::size_prefix("pmm size=300", 4, 1);
        assert_eq!(p, "pmm size=300|nodes=4|rpn=1|bw=");
        let pt = SweepPoint::new("pmm size=300", 4, 1, Pct::new(62.5).unwrap(), 0);
        assert!(pt.key.starts_with(&p));
        let other = SweepPoint::new("pmm size=300", 49, 1, Pct::new(62.5).unwrap(), 0);
        assert!(!other.key.starts_with(&p));
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
        // Issue 43, finding 7: every count bounded, and a precision that is a number.
        for (bad, says) in [
            ("retries = 4294967295", "`retries` must be at most 100"),
            (
                "repeats = \"auto\"\nmax_repeats = 4294967295\nprecision = 1e-300",
                "`max_repeats` must be at most 10000",
            ),
            (
                "max_repeats = 4294967295",
                "`max_repeats` must be at most 10000",
            ),
            ("precision = nan", "`precision` must be a share"),
        ] {
            let spec: SweepSpec = toml::from_str(&format!(
                "workload=\"bfs\"\nnodes=[1]\nbandwidths=[100]\n{bad}"
            ))
            .unwrap();
            let e = Sweep::new(spec)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains(says), "{bad}: {e}");
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
            super::super::steps::Steps::parse_list("100,50:30:-20").unwrap(),
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

    /// Issue 55, finding 2: a sweep whose analysis would be refused (more node counts, or
    /// (nodes, problem) cells, than `analyze` takes) is refused before its first run.
    #[test]
    fn a_sweep_its_analysis_would_refuse_is_refused_at_once() {
        let nodes: Vec<String> = (1..=65).map(|n| n.to_string()).collect();
        let many = format!(
            "workload = \"mw\"\nnodes = [{}]\nbandwidths = [100]\nrepeats = 1\n[mw]\nvolume = 1000\ncompute_seconds = 0.1\n",
            nodes.join(", ")
        );
        let e = Sweep::plan(toml::from_str(&many).unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("65 node counts") && e.contains("at most 64"),
            "{e}"
        );
        let seventeen: Vec<String> = (1..=17).map(|n| n.to_string()).collect();
        let axis = format!(
            "workload = \"mw\"\nnodes = [{}]\nbandwidths = [100]\nrepeats = 1\n[mw]\nvolume = 1000\ncompute_seconds = 0.1\n[problem]\nvalues = [1000, 2000]\n",
            seventeen.join(", ")
        );
        let e = Sweep::plan(toml::from_str(&axis).unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("17 node counts in 34") && e.contains("at most 16"),
            "{e}"
        );
    }

    #[test]
    fn a_problem_axis_is_one_series_with_a_sweep_per_value() {
        let text = r#"
            workload = "mw"
            nodes = [2, 3]
            bandwidths = [100, 50]
            repeats = 1
            [mw]
            volume = 1000
            compute_seconds = 0.1
            [problem]
            pairs = [[2, 1000], [3, 1000], [3, 2000]]
        "#;
        let sweeps = Sweep::plan(toml::from_str(text).unwrap()).unwrap();
        assert_eq!(sweeps.len(), 2);
        assert_eq!(sweeps[0].series, sweeps[1].series);
        assert!(
            sweeps[0].series.contains("volume=\"{n}\""),
            "{}",
            sweeps[0].series
        );
        assert_eq!(
            (sweeps[0].problem, sweeps[1].problem),
            (Some(1000), Some(2000))
        );
        assert_eq!(
            (sweeps[0].spec.nodes.clone(), sweeps[1].spec.nodes.clone()),
            (vec![2, 3], vec![3])
        );
        assert_eq!(sweeps[1].options["volume"], 2000);
        assert_eq!(sweeps[1].options["compute_seconds"], 0.2);
        // No two points of the series share a key.
        let mut keys: Vec<&str> = sweeps
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.key.as_str()))
            .collect();
        let all = keys.len();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!((keys.len(), all), (6, 6));
        // Each value's stored runs are its own: another value's options are no conflict,
        // a changed value's are.
        let dir = crate::store::test_dir();
        let path = dir.join(format!("problem-{}.db", std::process::id()));
        let store = Store::open(&path).unwrap();
        let mut row = RunRow::for_test(&sweeps[0].points[0].key, &sweeps[0].series, Pct::FULL, 0);
        row.workload = "mw".into();
        row.options = sweeps[0].options.to_string();
        row.problem = Some(1000.0);
        store.insert(&row).unwrap();
        let mut again = Sweep::plan(toml::from_str(text).unwrap()).unwrap();
        for s in &mut again {
            s.resume_as_stored(&store).unwrap();
        }
        let changed = text.replace("compute_seconds = 0.1", "compute_seconds = 0.3");
        let mut changed = Sweep::plan(toml::from_str(&changed).unwrap()).unwrap();
        // As a spec whose `name` stayed would have it.
        changed[0].series = sweeps[0].series.clone();
        let e = changed[0].resume_as_stored(&store).unwrap_err().to_string();
        assert!(e.contains("other settings"), "{e}");
        // The same name swept without a problem axis is refused.
        let mut plain = Sweep::new(
            toml::from_str(&text.replace(
                "[problem]\n            pairs = [[2, 1000], [3, 1000], [3, 2000]]",
                "",
            ))
            .unwrap(),
        )
        .unwrap();
        plain.series = sweeps[0].series.clone();
        let e = plain.resume_as_stored(&store).unwrap_err().to_string();
        assert!(e.contains("with a problem value"), "{e}");
        let _ = std::fs::remove_file(&path);
        // Refusals: [until] with a problem axis, a workload without a problem size.
        let t = format!("{text}[until]\nprocs = 3\n");
        let e = match Sweep::plan(toml::from_str(&t).unwrap()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{t}"),
        };
        assert!(e.contains("[until] and [problem]"), "{e}");
        let none = text.replace("nodes = [2, 3]", "nodes = []");
        let e = match Sweep::plan(toml::from_str(&none).unwrap()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{none}"),
        };
        assert!(e.contains("`nodes` must list"), "{e}");
        let program = r#"
            workload = "program"
            nodes = [2]
            bandwidths = [100]
            [program]
            name = "x"
            [problem]
            values = [1, 2]
        "#;
        let e = match Sweep::plan(toml::from_str(program).unwrap()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!(),
        };
        assert!(e.contains("no problem size"), "{e}");
    }

    #[test]
    fn latency_points_are_the_full_link_with_each_latency_under_their_own_keys() {
        let text = |latencies: &str| {
            format!(
                "workload = \"mw\"\nnodes = [2, 3]\nbandwidths = [100, 50]\nrepeats = 2\nlatencies = {latencies}\n"
            )
        };
        let sweep = Sweep::new(toml::from_str(&text("[0, 500]")).unwrap()).unwrap();
        let lat: Vec<&SweepPoint> = sweep
            .points
            .iter()
            .filter(|p| p.latency_us.is_some())
            .collect();
        // Per node count: the 0 baseline twice the repeats, 500 us the repeats.
        assert_eq!(lat.len(), 2 * (4 + 2), "{lat:?}");
        assert!(lat.iter().all(|p| p.bw == Pct::FULL));
        assert!(lat
            .iter()
            .any(|p| p.key.ends_with("|nodes=3|rpn=1|lat=500|rep=1")));
        assert_eq!(
            lat[0].setting(),
            format!("lat={}us", lat[0].latency_us.unwrap())
        );
        let mut keys: Vec<&str> = sweep.points.iter().map(|p| p.key.as_str()).collect();
        let all = keys.len();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), all);
        for (bad, want) in [
            ("[50, 200]", "needs 0"),
            ("[0]", "besides 0"),
            ("[0, 50, 50]", "twice"),
            ("[0, 10000001]", "more than a link adds"),
        ] {
            let e = match Sweep::new(toml::from_str(&text(bad)).unwrap()) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{bad}"),
            };
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn the_example_specs_in_experiments_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let s = Sweep::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                assert!(s.iter().all(|s| !s.points.is_empty()));
                n += 1;
            }
        }
        assert!(n >= 3, "expected the example specs in {}", dir.display());
    }
}
