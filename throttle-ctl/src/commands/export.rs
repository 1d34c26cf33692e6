//! `throttle-ctl export`: every stored run as CSV (quoted where needed), to a file or to
//! standard output (`| head` ends it quietly).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{Context, Exit};
use crate::output;
use crate::store::{Store, DEFAULT_DB};

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "The first columns are the ones `analyze --csv` reads:\n  workload,nodes,procs,bw_pct,repeat,seconds,status,..."
)]
pub struct Args {
    /// Results database [default: ./throttle-results.db].
    #[arg(long)]
    db: Option<PathBuf>,
    /// Output file [default: standard output].
    #[arg(long)]
    out: Option<PathBuf>,
}

impl Args {
    pub fn exec(self, _ctx: &Context) -> Exit {
        let db = self.db.unwrap_or_else(|| PathBuf::from(DEFAULT_DB));
        if !db.exists() {
            anyhow::bail!("no results database at {}", db.display());
        }
        let store = Store::open(&db)?;
        match self.out {
            Some(f) => store.export_csv(std::io::BufWriter::new(std::fs::File::create(&f)?))?,
            None => store.export_csv(std::io::stdout().lock()).map_err(|e| {
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
