//! `throttle-ctl export`: every stored run as CSV (quoted where needed), to a file or to
//! standard output (`| head` ends it quietly).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{Context, Exit};
use crate::measurements::{self, TimeSource};
use crate::output;
use crate::store::{RunRow, Store, DEFAULT_DB};

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "The first columns are the ones `analyze --csv` reads:\n  workload,nodes,procs,bw_pct,repeat,seconds,status,...\n`seconds` is the time `analyze --db` analyses with the same --time (the `seconds_is`\ncolumn says which: wall, kernel, or 1/rate and the rate's name); `wall_seconds` is the job's wall time and\n`kernel_seconds` the workload's own, for `analyze --csv --time job|kernel`."
)]
pub struct Args {
    /// Results database [default: ./throttle-results.db].
    #[arg(long)]
    db: Option<PathBuf>,
    /// Output file [default: standard output].
    #[arg(long)]
    out: Option<PathBuf>,
    /// The time written as `seconds`: job (launch to exit), kernel (the workload's own
    /// timing), or auto (kernel when every run reported one), as `analyze` chooses it.
    #[arg(long, default_value = "auto")]
    time: TimeSource,
}

impl Args {
    pub fn exec(self, _ctx: &Context) -> Exit {
        let db = self.db.unwrap_or_else(|| PathBuf::from(DEFAULT_DB));
        if !db.exists() {
            anyhow::bail!("no results database at {}", db.display());
        }
        let store = Store::read(&db)?;
        let rows = store.rows()?;
        // A store of rates beside seconds has no one `seconds`: export still writes every
        // row, with the job's wall time there (and says so).
        let chosen = match measurements::choose(&rows, self.time) {
            Err(e) if self.time == TimeSource::Auto => {
                crate::note!("warning: {e:#}: `seconds` is the job's wall time");
                measurements::choose(&rows, TimeSource::Job)?
            }
            other => other?,
        };
        let (kernel, what) = (chosen.kernel, chosen.what);
        let time = |r: &RunRow| measurements::time_of(r, kernel);
        match self.out {
            Some(f) => Store::export_csv(
                rows,
                std::io::BufWriter::new(std::fs::File::create(&f)?),
                time,
                what,
            )?,
            None => Store::export_csv(rows, std::io::stdout().lock(), time, what).map_err(|e| {
                if output::is_closed_output(&e) {
                    output::ClosedOutput.into()
                } else {
                    e
                }
            })?,
        }
        Ok(ExitCode::SUCCESS)
    }
}
