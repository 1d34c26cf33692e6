//! `throttle-ctl demo`: the whole method on a local emulated cluster, in a few minutes.
//!
//! Brings agents up, sweeps BFS over node counts (1..4 by default, sized for a 2-core
//! machine) at stepped bandwidths (the largest size is held out for validation), analyses, projects to the held-out size and to twice it,
//! prints the tables, writes the report, and takes the cluster down, also on error or
//! Ctrl-C. Everything lands in one directory (cluster file, results database, report).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::Result;
use throttle_agent::rate::Rate;

use crate::analysis::{self, Analysis, Request};
use crate::local::{self, LocalUp};
use crate::store::Store;
use crate::sweep::{self, Sweep, SweepEnd, SweepSpec};
use crate::{cluster::Cluster, report};

#[derive(Clone, Debug)]
pub struct DemoOptions {
    pub dir: PathBuf,
    /// Node counts to sweep; the largest is held out for validation.
    pub sizes: Vec<usize>,
    pub capacity: Rate,
    pub scale: u32,
    pub keys: usize,
    pub repeats: u32,
    pub bandwidths: Vec<String>,
    pub cti: Vec<f64>,
}

/// What the demo produced.
pub struct DemoResult {
    pub analysis: Analysis,
    pub text: String,
    pub report: PathBuf,
    pub db: PathBuf,
    pub interrupted: bool,
}

/// Stops the local cluster when dropped.
struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = local::down(&self.0);
    }
}

pub fn run(
    opts: &DemoOptions,
    cancel: &AtomicBool,
    mut progress: impl FnMut(&str),
) -> Result<DemoResult> {
    let mut sizes = opts.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.len() < 4 || sizes[0] == 0 {
        anyhow::bail!("the demo needs at least 4 node counts (3 to fit, the largest held out)");
    }
    let max_nodes = *sizes.last().unwrap_or(&1);
    std::fs::create_dir_all(&opts.dir)?;
    let dir = opts.dir.canonicalize()?;
    let cluster_path = dir.join("throttle-cluster.toml");
    if cluster_path.exists() {
        let _ = local::down(&cluster_path);
    }
    let db = dir.join("results.db");
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", db.display()));
    }
    progress(&format!(
        "starting {max_nodes} agents at {} each ...",
        opts.capacity
    ));
    let up = LocalUp {
        nodes: max_nodes,
        capacity: opts.capacity,
        base_addr: std::net::Ipv4Addr::new(127, 0, 1, 1),
        dir: dir.join("state"),
        agent_args: vec!["--threads".into(), "1".into()],
        tls: false,
    };
    local::up(&up, &cluster_path)?;
    let _down = Down(cluster_path.clone());
    let cluster = Cluster::load(&cluster_path)?;
    let nodes: Vec<String> = sizes.iter().map(|n| n.to_string()).collect();
    let bws: Vec<String> = opts.bandwidths.iter().map(|b| format!("\"{b}\"")).collect();
    let spec_text = format!(
        "workload = \"bfs\"\nnodes = [{}]\nbandwidths = [{}]\nrepeats = {}\ntime_limit = 300\nseed = 1\n[bfs]\nscale = {}\nkeys = {}\nvalidate = false\n",
        nodes.join(", "),
        bws.join(", "),
        opts.repeats,
        opts.scale,
        opts.keys
    );
    std::fs::write(dir.join("sweep.toml"), &spec_text)?;
    let spec: SweepSpec = toml::from_str(&spec_text)?;
    let sweep = Sweep::new(spec)?;
    progress(&format!(
        "sweeping BFS scale {} on {} nodes, {} bandwidth steps, {} repeats: {} runs",
        opts.scale,
        nodes.join(", "),
        sweep.points.len() / sizes.len() / opts.repeats as usize,
        opts.repeats,
        sweep.points.len()
    ));
    let store = Store::open(&db)?;
    let options = sweep::SweepOptions {
        job_prefix: sweep::job_prefix(&db, &sweep.series),
        lease_s: crate::commands::run::DEFAULT_LEASE_S,
        fail_fast: false,
    };
    let end = sweep::run(&sweep, &cluster, &store, &options, cancel, &mut progress)?;
    let interrupted = matches!(end, SweepEnd::Interrupted { .. });
    let held_out = max_nodes as u32;
    let (obs, time_source) = store.observations("auto")?;
    let req = Request {
        cti: opts.cti.clone(),
        predict: vec![held_out, held_out * 2],
        series: None,
        time_source,
    };
    let analysis = analysis::analyze(&obs, &req)?;
    let cap = opts.capacity.to_string();
    let text = analysis::render(&analysis, &opts.cti, Some(&cap));
    let report = report::write(&dir.join("report"), &analysis, &opts.cti, Some(&cap))?;
    Ok(DemoResult {
        analysis,
        text,
        report,
        db,
        interrupted,
    })
}

/// The default demo directory.
pub fn default_dir() -> PathBuf {
    Path::new("throttle-demo").to_path_buf()
}
