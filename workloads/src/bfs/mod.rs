//! Graph500-style breadth-first search: generate, distribute, search from 64 keys,
//! validate, and report TEPS the way the Graph500 reference code does.
//!
//! * [`generator`]: the Kronecker graph, identical whatever the number of ranks.
//! * [`graph`]: 2-D distribution over the process grid.
//! * [`search`]: one level-synchronous BFS.
//! * [`validate`]: the five Graph500 rules.
//!
//! With `emulate_meps` set, every level's local step lasts as long as on a node scanning
//! that many million edges per second (the rest of it is slept): each rank stands for a
//! node with its own CPU, so 25 ranks fit on a 2-core host without their compute
//! competing for its cores. The search, its messages and its validation stay real.

pub mod generator;
pub mod graph;
pub mod search;
pub mod validate;

use std::time::Instant;

use serde::Serialize;

use throttle_proto::workload::BfsOptions;

use crate::comm::collectives::{self, Bcast};
use crate::comm::{Comm, CommError};
use generator::Kronecker;
use graph::DistGraph;
use search::SearchResult;

#[derive(Clone, Debug, Serialize)]
pub struct BfsResult {
    pub workload: &'static str,
    pub scale: u32,
    pub edge_factor: u32,
    pub procs: usize,
    pub grid: [usize; 2],
    /// The emulated scan rate (million edges/s per node), when compute was emulated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulate_meps: Option<f64>,
    /// With emulation: the local steps' emulated time on this rank, all searches (s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulated_compute_seconds: Option<f64>,
    pub construction_seconds: f64,
    pub keys: Vec<u32>,
    pub search_seconds: Vec<f64>,
    pub edges_traversed: Vec<u64>,
    pub teps: Vec<f64>,
    pub harmonic_mean_teps: f64,
    pub harmonic_stddev_teps: f64,
    /// Sum of the search times: the kernel time.
    pub seconds: f64,
    /// Time rank 0 spent in send/recv during the searches, and the rest.
    pub comm_seconds: f64,
    pub compute_seconds: f64,
    pub comm_share: f64,
    /// `passed`, `off`, or the first failure.
    pub validation: String,
    pub validated: bool,
    /// Level of every vertex of the first search (tests; not serialized).
    #[serde(skip)]
    pub first_levels: Vec<i64>,
}

impl BfsResult {
    /// What rank 0 reports: the kernel time (the sum of the search times), the
    /// validation, TEPS and the communication share; the whole result as detail.
    pub fn report(&self) -> throttle_proto::result::WorkloadResult {
        use throttle_proto::result::{Check, WorkloadResult};
        WorkloadResult {
            workload: "bfs".into(),
            seconds: Some(self.seconds),
            check: match self.validation.as_str() {
                "off" => Check::Off,
                "passed" => Check::Passed,
                other => Check::Failed(other.to_string()),
            },
            metrics: [
                ("harmonic_mean_teps", self.harmonic_mean_teps),
                ("harmonic_stddev_teps", self.harmonic_stddev_teps),
                ("construction_seconds", self.construction_seconds),
                ("comm_seconds", self.comm_seconds),
                ("compute_seconds", self.compute_seconds),
                ("comm_share", self.comm_share),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            detail: serde_json::to_value(self).unwrap_or_default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BfsError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Comm(#[from] CommError),
}

/// Pick `count` keys with degree >= 1, the same ones whatever the number of ranks.
fn choose_keys(
    comm: &Comm,
    g: &DistGraph,
    gen: &Kronecker,
    count: usize,
) -> Result<Vec<u32>, CommError> {
    let world = comm.world();
    let (s, e) = g.own_range();
    let mut keys = Vec::new();
    let mut next = 0u64;
    let limit = 64 * (count as u64 + 16) * 64;
    while keys.len() < count && next < limit {
        let batch: Vec<u32> = (next..next + 256).map(|i| gen.key_candidate(i)).collect();
        next += 256;
        let flags: Vec<u8> = batch
            .iter()
            .map(|&v| {
                let v = v as u64;
                ((s..e).contains(&v) && g.degree[(v - s) as usize] > 0) as u8
            })
            .collect();
        let all = collectives::allgatherv(comm, &world, &flags)?;
        for (k, &v) in batch.iter().enumerate() {
            if keys.len() < count && all.iter().any(|f| f[k] == 1) && !keys.contains(&v) {
                keys.push(v);
            }
        }
    }
    Ok(keys)
}

fn to_i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_i64_bytes(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8)
        .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect()
}

/// The whole benchmark: collective over all ranks; every rank gets the same result.
pub fn benchmark(comm: &Comm, cfg: &BfsOptions) -> Result<BfsResult, BfsError> {
    cfg.check()
        .and_then(|()| cfg.check_procs(comm.size()))
        .map_err(|e| BfsError::Config(e.to_string()))?;
    let gen = Kronecker::new(cfg.scale, cfg.edge_factor, cfg.seed);
    let (g, construction_seconds) = construct(comm, &gen)?;
    let keys = choose_keys(comm, &g, &gen, cfg.keys)?;
    if keys.is_empty() {
        return Err(BfsError::Config(
            "the graph has no vertex with an edge".into(),
        ));
    }
    let log = run_searches(comm, cfg, &g, &gen, &keys)?;
    // Every rank reports rank 0's times so the result is the same everywhere.
    let search_seconds = rank0_f64s(comm, &log.search_seconds)?;
    let teps: Vec<f64> = search_seconds
        .iter()
        .zip(&log.edges_traversed)
        .map(|(t, m)| *m as f64 / t.max(1e-12))
        .collect();
    let (hm, hsd) = harmonic_mean_and_stddev(&teps);
    let seconds: f64 = search_seconds.iter().sum();
    let comm_seconds = rank0_f64(comm, log.comm_seconds)?;
    Ok(BfsResult {
        workload: "bfs",
        scale: cfg.scale,
        edge_factor: cfg.edge_factor,
        procs: comm.size(),
        grid: [g.grid.rows, g.grid.cols],
        emulate_meps: cfg.emulate_meps,
        emulated_compute_seconds: cfg.emulate_meps.map(|_| log.emulated),
        construction_seconds,
        keys,
        search_seconds,
        edges_traversed: log.edges_traversed,
        teps,
        harmonic_mean_teps: hm,
        harmonic_stddev_teps: hsd,
        seconds,
        comm_seconds,
        compute_seconds: (seconds - comm_seconds).max(0.0),
        comm_share: if seconds > 0.0 {
            comm_seconds / seconds
        } else {
            0.0
        },
        validation: log.validation,
        validated: log.validated,
        first_levels: log.first_levels,
    })
}

/// Build the distributed graph between two barriers; returns it and the construction
/// time (s).
fn construct(comm: &Comm, gen: &Kronecker) -> Result<(DistGraph, f64), CommError> {
    let world = comm.world();
    collectives::barrier(comm, &world)?;
    let t = Instant::now();
    let g = DistGraph::build(comm, gen)?;
    collectives::barrier(comm, &world)?;
    Ok((g, t.elapsed().as_secs_f64()))
}

/// What the searches leave on this rank: their times and edge counts, the time in
/// send/recv, the emulated compute, the first search's levels (rank 0) and the verdict.
struct SearchLog {
    search_seconds: Vec<f64>,
    edges_traversed: Vec<u64>,
    comm_seconds: f64,
    emulated: f64,
    first_levels: Vec<i64>,
    /// `passed`, `off`, or the first failure.
    validation: String,
    validated: bool,
}

/// Search from every key in turn (timed between a barrier and the search's end),
/// counting the edges traversed and validating as `cfg` asks.
fn run_searches(
    comm: &Comm,
    cfg: &BfsOptions,
    g: &DistGraph,
    gen: &Kronecker,
    keys: &[u32],
) -> Result<SearchLog, CommError> {
    let world = comm.world();
    // Rank 0 regenerates the edge list for validation (deterministic, no communication).
    let all_edges = if cfg.validate && comm.rank() == 0 {
        gen.edges_in(0, gen.edges())
    } else {
        Vec::new()
    };
    let mut log = SearchLog {
        search_seconds: Vec::new(),
        edges_traversed: Vec::new(),
        comm_seconds: 0.0,
        emulated: 0.0,
        first_levels: Vec::new(),
        validation: if cfg.validate {
            "passed".to_string()
        } else {
            "off".to_string()
        },
        validated: cfg.validate,
    };
    let scan_rate = cfg.emulate_meps.map(|r| r * 1e6);
    for (k, &root) in keys.iter().enumerate() {
        collectives::barrier(comm, &world)?;
        let c0 = comm.comm_seconds();
        let t = Instant::now();
        let r = search::bfs(comm, g, root, scan_rate)?;
        let secs = t.elapsed().as_secs_f64();
        log.emulated += r.emulated_seconds;
        log.comm_seconds += comm.comm_seconds() - c0;
        let traversed = edges_in_component(comm, g, &r)?;
        log.search_seconds.push(secs);
        log.edges_traversed.push(traversed);
        if cfg.validate || k == 0 {
            let edges = (cfg.validate && log.validated).then_some(all_edges.as_slice());
            let verdict = gather_and_validate(comm, k, root, &r, edges, &mut log.first_levels)?;
            if !verdict.is_empty() {
                log.validated = false;
                log.validation = String::from_utf8_lossy(&verdict).into_owned();
            }
        }
    }
    Ok(log)
}

/// Edges in the component searched: half the degree sum of the reached vertices, summed
/// over all ranks.
fn edges_in_component(comm: &Comm, g: &DistGraph, r: &SearchResult) -> Result<u64, CommError> {
    let local: u64 = r
        .parent
        .iter()
        .zip(&g.degree)
        .filter(|(p, _)| **p >= 0)
        .map(|(_, d)| *d as u64)
        .sum();
    Ok(collectives::allreduce_sum_u64(comm, &comm.world(), local)? / 2)
}

/// Gather search `k`'s parents and levels on rank 0, keep the first search's levels
/// there, and validate against `edges` when given; returns the verdict every rank gets
/// (empty: none).
fn gather_and_validate(
    comm: &Comm,
    k: usize,
    root: u32,
    r: &SearchResult,
    edges: Option<&[(u32, u32)]>,
    first_levels: &mut Vec<i64>,
) -> Result<Vec<u8>, CommError> {
    let world = comm.world();
    let parents = collectives::gatherv(comm, &world, 0, &to_i64_bytes(&r.parent))?;
    let levels = collectives::gatherv(comm, &world, 0, &to_i64_bytes(&r.level))?;
    let mut verdict = Vec::new();
    if comm.rank() == 0 {
        let parent: Vec<i64> = parents.iter().flat_map(|b| from_i64_bytes(b)).collect();
        let level: Vec<i64> = levels.iter().flat_map(|b| from_i64_bytes(b)).collect();
        if k == 0 {
            *first_levels = level.clone();
        }
        if let Some(edges) = edges {
            if let Err(err) = validate::validate(&parent, &level, root, edges) {
                verdict = format!("search {k} from {root}: {err}").into_bytes();
            }
        }
    }
    collectives::bcast(comm, &world, 0, verdict, Bcast::Binomial)
}

/// Rank 0's `values`, on every rank.
fn rank0_f64s(comm: &Comm, values: &[f64]) -> Result<Vec<f64>, CommError> {
    let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
    let got = collectives::bcast(comm, &comm.world(), 0, bytes, Bcast::Binomial)?;
    Ok(got
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

/// Rank 0's `value`, on every rank.
fn rank0_f64(comm: &Comm, value: f64) -> Result<f64, CommError> {
    let got = collectives::bcast(
        comm,
        &comm.world(),
        0,
        value.to_le_bytes().to_vec(),
        Bcast::Binomial,
    )?;
    Ok(f64::from_le_bytes(
        got.as_slice().try_into().unwrap_or([0; 8]),
    ))
}

/// Harmonic mean and its standard deviation, as the Graph500 reference computes them.
pub fn harmonic_mean_and_stddev(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    if x.is_empty() {
        return (0.0, 0.0);
    }
    let inv: Vec<f64> = x.iter().map(|v| 1.0 / v).collect();
    let mean_inv = inv.iter().sum::<f64>() / n;
    let hm = 1.0 / mean_inv;
    if x.len() < 2 {
        return (hm, 0.0);
    }
    let var = inv.iter().map(|v| (v - mean_inv).powi(2)).sum::<f64>() / (n - 1.0);
    (hm, var.sqrt() / (mean_inv * mean_inv) / (n - 1.0).sqrt())
}

fn quantiles(v: &[f64]) -> [f64; 5] {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize];
    [q(0.0), q(0.25), q(0.5), q(0.75), q(1.0)]
}

/// The Graph500 summary lines.
pub fn summary(r: &BfsResult) -> String {
    let mut out = String::new();
    let t = quantiles(&r.search_seconds);
    let te = quantiles(&r.teps);
    let m: Vec<f64> = r.edges_traversed.iter().map(|&x| x as f64).collect();
    let ne = quantiles(&m);
    let mean_t = r.seconds / r.search_seconds.len() as f64;
    out.push_str(&format!("SCALE:                          {}\n", r.scale));
    out.push_str(&format!(
        "edgefactor:                     {}\n",
        r.edge_factor
    ));
    out.push_str(&format!(
        "NBFS:                           {}\n",
        r.search_seconds.len()
    ));
    out.push_str(&format!("num_mpi_processes:              {}\n", r.procs));
    out.push_str(&format!(
        "construction_time:              {:.6e}\n",
        r.construction_seconds
    ));
    for (name, v) in ["min", "firstquartile", "median", "thirdquartile", "max"]
        .iter()
        .zip(t)
    {
        out.push_str(&format!("bfs  {name}_time: {:>18.6e}\n", v));
    }
    out.push_str(&format!("bfs  mean_time:          {mean_t:.6e}\n"));
    for (name, v) in ["min", "firstquartile", "median", "thirdquartile", "max"]
        .iter()
        .zip(ne)
    {
        out.push_str(&format!("bfs  {name}_nedge: {:>17.6e}\n", v));
    }
    for (name, v) in ["min", "firstquartile", "median", "thirdquartile", "max"]
        .iter()
        .zip(te)
    {
        out.push_str(&format!("bfs  {name}_TEPS: {:>18.6e}\n", v));
    }
    out.push_str(&format!(
        "bfs  harmonic_mean_TEPS: {:>10.6e}\n",
        r.harmonic_mean_teps
    ));
    out.push_str(&format!(
        "bfs  harmonic_stddev_TEPS: {:>8.6e}\n",
        r.harmonic_stddev_teps
    ));
    out.push_str(&format!(
        "validation:                     {}\n",
        r.validation
    ));
    out.push_str(&format!(
        "communication share:            {:.1}% ({:.3} s of {:.3} s)\n",
        r.comm_share * 100.0,
        r.comm_seconds,
        r.seconds
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::run_local;

    fn cfg(scale: u32) -> BfsOptions {
        BfsOptions {
            scale,
            edge_factor: 16,
            seed: 3,
            keys: 8,
            validate: true,
            emulate_meps: None,
        }
    }

    #[test]
    fn results_are_identical_for_1_2_4_and_9_ranks() {
        let mut reference: Option<(Vec<u32>, Vec<u64>, Vec<i64>)> = None;
        for p in [1usize, 2, 4, 9] {
            let res = run_local(p, |c| benchmark(&c, &cfg(10)).unwrap());
            let r0 = &res[0];
            assert!(r0.validated, "p={p}: {}", r0.validation);
            for r in &res {
                assert_eq!(r.keys, r0.keys);
                assert_eq!(r.edges_traversed, r0.edges_traversed);
            }
            let got = (
                r0.keys.clone(),
                r0.edges_traversed.clone(),
                r0.first_levels.clone(),
            );
            match &reference {
                None => reference = Some(got),
                Some(want) => assert_eq!(&got, want, "p={p} differs from p=1"),
            }
        }
    }

    #[test]
    fn matches_a_sequential_bfs() {
        let res = run_local(4, |c| benchmark(&c, &cfg(9)).unwrap());
        let gen = Kronecker::new(9, 16, 3);
        let edges = gen.edges_in(0, gen.edges());
        let (_, level) = validate::sequential_bfs(gen.vertices() as usize, &edges, res[0].keys[0]);
        assert_eq!(res[0].first_levels, level);
    }

    #[test]
    fn emulated_compute_keeps_the_search_and_takes_the_emulated_time() {
        let real = run_local(4, |c| benchmark(&c, &cfg(10)).unwrap());
        let at = |meps: f64| {
            run_local(4, move |c| {
                benchmark(
                    &c,
                    &BfsOptions {
                        emulate_meps: Some(meps),
                        ..cfg(10)
                    },
                )
                .unwrap()
            })
        };
        let slow = at(0.2);
        let fast = at(0.4);
        for (r, s) in real.iter().zip(&slow) {
            assert!(s.validated, "{}", s.validation);
            assert_eq!(s.edges_traversed, r.edges_traversed);
            assert_eq!(s.first_levels, r.first_levels);
            assert_eq!(r.emulated_compute_seconds, None);
        }
        // The emulated time is the edges this rank scanned over the rate: half the rate,
        // twice the time; and the searches took at least that long.
        let e0 = slow[0].emulated_compute_seconds.unwrap();
        let e1 = fast[0].emulated_compute_seconds.unwrap();
        assert!(e0 > 0.1, "{e0}");
        assert!((e0 / e1 - 2.0).abs() < 1e-9, "{e0} {e1}");
        for s in &slow {
            let e = s.emulated_compute_seconds.unwrap();
            assert!(s.seconds >= 0.99 * e, "{} < {e}", s.seconds);
        }
        for bad in [0.0, -1.0, f64::NAN, 1e-4, 1e7] {
            let e = run_local(1, move |c| {
                benchmark(
                    &c,
                    &BfsOptions {
                        emulate_meps: Some(bad),
                        ..cfg(6)
                    },
                )
                .unwrap_err()
                .to_string()
            });
            assert!(
                e[0].contains("emulate_meps must be from"),
                "{bad}: {}",
                e[0]
            );
        }
    }

    #[test]
    fn harmonic_mean_is_right() {
        let (hm, _) = harmonic_mean_and_stddev(&[1.0, 2.0, 4.0]);
        assert!((hm - 3.0 / (1.0 + 0.5 + 0.25)).abs() < 1e-12);
    }

    #[test]
    fn summary_has_the_graph500_lines() {
        let res = run_local(1, |c| benchmark(&c, &cfg(8)).unwrap());
        let s = summary(&res[0]);
        assert!(s.contains("bfs  harmonic_mean_TEPS:"), "{s}");
        assert!(s.contains("SCALE:                          8"));
    }
}
