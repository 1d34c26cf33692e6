//! `throttle-ctl output JOB`: the output a stored run kept (a `--cmd` command's whole
//! output, up to its cap; a built-in workload's last lines), found by its job name.
//!
//! The store is treated as anyone's file: its text is printed with control characters
//! written out, so that it cannot drive the terminal.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::Args as ClapArgs;
use throttle_analysis::table::printable;

use super::{Context, Exit};
use crate::output;
use crate::store::{Store, DEFAULT_DB};

/// What the errors add for the job name `throttle-ctl run` prints, whose run is not stored.
const RUN_IS_NOT_STORED: &str = "; `throttle-ctl run` stores nothing (its job's output is what it printed: `run --verbose` prints all of it, `run --json` holds it in `output`)";

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "A run's job name is in `throttle-ctl export`'s `job` column, and on a sweep's\nline for a failed run. Example:\n  throttle-ctl output sw1a2b3c4d-command-1764230000000-0a1b2c"
)]
pub struct Args {
    /// The run's job name.
    job: String,
    /// Results database [default: ./throttle-results.db].
    #[arg(long)]
    db: Option<PathBuf>,
}

impl Args {
    pub fn exec(self, _ctx: &Context) -> Exit {
        let db = self.db.unwrap_or_else(|| PathBuf::from(DEFAULT_DB));
        if !db.exists() {
            bail!(
                "no results database at {}: a sweep's runs are in the database its --db names{RUN_IS_NOT_STORED}",
                db.display()
            );
        }
        let store = Store::read(&db)?;
        let outputs = store.outputs_of(&self.job)?;
        let job = printable(&self.job);
        if outputs.is_empty() {
            if store.has_job(&self.job)? {
                bail!("job {job} is stored in {} but kept no output (it printed nothing, or an older throttle stored it)", db.display());
            }
            bail!(
                "no run of job {job} in {}: `throttle-ctl export` lists the stored runs (column `job`){RUN_IS_NOT_STORED}",
                db.display()
            );
        }
        let mut text = String::new();
        for (i, o) in outputs.iter().enumerate() {
            if outputs.len() > 1 {
                text.push_str(&format!(
                    "--- run {} of {} of job {job}\n",
                    i + 1,
                    outputs.len()
                ));
            }
            for line in o.lines() {
                text.push_str(&printable(line));
                text.push('\n');
            }
        }
        output::print(text)?;
        Ok(ExitCode::SUCCESS)
    }
}
