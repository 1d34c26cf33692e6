//! `throttle-ctl export`: every stored run as CSV (quoted where needed), or one series'
//! runs as Extra-P's text input, to a file or to standard output (`| head` ends it
//! quietly).

use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

use clap::Args as ClapArgs;
use throttle_proto::rate::format_bits_per_sec;

use super::{Context, Exit};
use crate::measurements::{self, TimeSource};
use crate::output;
use crate::store::{RunRow, Store, DEFAULT_DB};

/// What `export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Every stored run, one row each.
    Csv,
    /// One series' runs as Extra-P's text input.
    Extrap,
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "csv" => Ok(Format::Csv),
            "extrap" => Ok(Format::Extrap),
            other => Err(format!("`{other}` is not csv or extrap")),
        }
    }
}

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "The first columns are the ones `analyze --csv` reads:\n  workload,nodes,procs,bw_pct,repeat,seconds,status,...\n`seconds` is the time `analyze --db` analyses with the same --time (the `seconds_is`\ncolumn says which: wall, kernel, or 1/rate and the rate's name); `wall_seconds` is the job's wall time and\n`kernel_seconds` the workload's own, for `analyze --csv --time job|kernel`;\n`rate` the rate a command printed (--rate-regex), as it printed it, named in\n`rate_name` as the regex names it (harmonic_mean_TEPS);\n`capacity_bytes_per_sec` the link the run had at 100% (100 Mbit/s: 12500000).\n\n--format extrap writes Extra-P's text input (`extrap --text FILE`): parameters p\n(processes) and bw (the bandwidth setting, % of the link), one POINTS line per\nmeasured (p, bw), one DATA line per point holding its repeats' times (the metric\n`time`, in seconds, or `inverse_rate` for a command measured by a rate: 1/rate), the\nseries as the REGION; the runs `analyze` uses (failed, flagged and unlimited runs\nleft out, counted in the comment lines). Example:\n  throttle-ctl export --format extrap --series 'mw n=3' --out mw.txt && extrap --text mw.txt\n(docs/exports.md: Extra-P's options for times that fall with p and bw.)"
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
    /// csv: every stored run, one row each; extrap: one series' runs as Extra-P's text
    /// input (parameters p and bw, the times as DATA; see below).
    #[arg(long, default_value = "csv", value_name = "csv|extrap")]
    format: Format,
    /// Only this series' runs (as `analyze --series`); --format extrap needs it when the
    /// store holds several.
    #[arg(long)]
    series: Option<String>,
}

impl Args {
    pub fn exec(self, _ctx: &Context) -> Exit {
        if let Some(f) = &self.out {
            super::check_output_file("--out", f)?;
        }
        let db = self.db.unwrap_or_else(|| PathBuf::from(DEFAULT_DB));
        if !db.exists() {
            anyhow::bail!("no results database at {}", db.display());
        }
        let store = Store::read(&db)?;
        let mut rows = store.rows()?;
        if let Some(s) = &self.series {
            let mut names: Vec<String> = rows.iter().map(|r| r.series.clone()).collect();
            rows.retain(|r| &r.series == s);
            if rows.is_empty() {
                names.sort();
                names.dedup();
                anyhow::bail!(
                    "--series `{s}`: no such series in {}; it holds: {}",
                    db.display(),
                    if names.is_empty() {
                        "no runs".to_string()
                    } else {
                        names
                            .iter()
                            .map(|n| format!("`{}`", throttle_analysis::table::printable(n)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                );
            }
        }
        if self.format == Format::Extrap && rows.is_empty() {
            anyhow::bail!(
                "{} holds no runs: nothing to export to Extra-P (a sweep stores them: `throttle-ctl sweep SPEC.toml --db {}`)",
                db.display(),
                db.display()
            );
        }
        // A store of rates beside seconds has no one `seconds`: export still writes every
        // row, with the job's wall time there (and says so).
        let chosen = match measurements::choose(&rows, self.time) {
            Err(e) if self.time == TimeSource::Auto => {
                let what = match self.format {
                    Format::Csv => "`seconds`",
                    Format::Extrap => "the metric",
                };
                crate::note!("warning: {e:#}: {what} is the job's wall time");
                measurements::choose(&rows, TimeSource::Job)?
            }
            other => other?,
        };
        let (kernel, what) = (chosen.kernel, chosen.what);
        if self.format == Format::Extrap {
            // The runs as the analysis reads them (checked as it checks them).
            let time = if kernel {
                TimeSource::Kernel
            } else {
                TimeSource::Job
            };
            let (obs, chosen) = measurements::observations(&rows, time)?;
            let capacity = store.capacity()?.map(format_bits_per_sec);
            // `--series` kept one series' rows (by its stored name) already.
            let text =
                crate::extrap::text(&obs, None, chosen.unit, chosen.what, capacity.as_deref())?;
            return match &self.out {
                Some(f) => super::write_output_file("--out", f, &text).map(|_| ExitCode::SUCCESS),
                None => output::print(text).map(|_| ExitCode::SUCCESS),
            };
        }
        let time = |r: &RunRow| measurements::time_of(r, kernel);
        match self.out {
            Some(f) => {
                // Whole, then written as analyze's exports are (no link followed).
                let mut csv = Vec::new();
                Store::export_csv(rows, &mut csv, time, what)?;
                super::write_output_file("--out", &f, &String::from_utf8_lossy(&csv))?;
            }
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
