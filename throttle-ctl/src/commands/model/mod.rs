//! `throttle-ctl model pmm|mw|loggps`: the other seed papers' analytic models against what
//! the emulator measured (`throttle_analysis::models` holds the formulas).
//!
//! `loggps` runs measurements on the cluster and stores them; `pmm` and `mw` read stored
//! runs (from sweeps) and the stored LogGPS parameters, and print predicted against
//! measured, with `--json` and `--report DIR`.

mod loggps;
mod mw;
mod pmm;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args as ClapArgs, Subcommand};
use throttle_analysis::models::loggps::LinkMeasurement;

use super::{Context, Exit};
use crate::store::{RunRow, Store, DEFAULT_DB};

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "Examples:\n  throttle-ctl model loggps --bandwidths 100,50,20 --procs 2,4   measure L, o, g, G through the agents\n  throttle-ctl model pmm --report pmm-model/    Fox PMM runs in the store against the Fox PMM model\n  throttle-ctl model mw --json                   master/worker runs against the master/worker thesis's closed forms\n\nRun `model loggps` first: `pmm` and `mw` then use the measured Tcomm, start-up and\nper-message overheads instead of the nominal link (8 bytes / (pct x capacity))."
)]
pub struct Args {
    #[command(subcommand)]
    model: Model,
}

#[derive(Subcommand, Debug)]
enum Model {
    /// Fox's matrix multiplication (Li, Qiu, Fox): predicted vs measured time per grid, size,
    /// broadcast and bandwidth, and the paper's parallel-overhead check.
    Pmm(pmm::Args),
    /// Master/worker (the master/worker thesis; Mizutani et al.): iteration time per worker
    /// count, the optimal number of workers and how it moves with bandwidth.
    Mw(mw::Args),
    /// LogGPS parameters (Mizutani et al.) measured through the agents at each bandwidth and
    /// process count; stored for `pmm` and `mw`. Exits with 1 when G misses
    /// 1 / (pct x capacity) by more than 2%.
    Loggps(loggps::Args),
}

impl Args {
    pub fn exec(self, ctx: &Context) -> Exit {
        match self.model {
            Model::Pmm(a) => a.exec(),
            Model::Mw(a) => a.exec(),
            Model::Loggps(a) => a.exec(ctx),
        }
    }
}

/// The store's successful runs of `workload` and its LogGPS measurements.
fn stored(
    db: &Option<PathBuf>,
    workload: &str,
    how: &str,
) -> Result<(Vec<RunRow>, Vec<LinkMeasurement>)> {
    let db = db.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_DB));
    if !db.exists() {
        anyhow::bail!(
            "no results database at {}: {how}, or pass --db",
            db.display()
        );
    }
    let store = Store::read(&db)?;
    let runs: Vec<RunRow> = store
        .rows()?
        .into_iter()
        // A latency point (`latencies`: the full link with a latency added) is no run at
        // its bandwidth setting; a flagged run's links did not run at theirs (as
        // `analyze`, the models leave it out).
        .filter(|r| r.workload == workload && r.good() && r.latency_step.is_none())
        .collect();
    if runs.is_empty() {
        anyhow::bail!(
            "{} holds no successful {workload} run whose links held their setting (flagged runs are left out): {how}",
            db.display()
        );
    }
    Ok((runs, store.links()?))
}

/// A metric from a run's stored metrics (JSON object).
fn metric(r: &RunRow, name: &str) -> Option<f64> {
    let m: serde_json::Value = serde_json::from_str(r.metrics.as_deref()?).ok()?;
    m.get(name)?.as_f64()
}

/// Seconds for people: ms below one second.
fn secs(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() < 1.0 {
        format!("{:.2} ms", v * 1e3)
    } else {
        format!("{v:.3} s")
    }
}

fn pct_err(e: f64) -> String {
    format!("{:+.1}%", e * 100.0)
}
