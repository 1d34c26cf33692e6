//! `throttle-ctl analyze`: CTI curves, bandwidth demand, the demand constant and
//! projections, from the results store or a CSV file measured anywhere.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::anyhow;
use clap::Args as ClapArgs;
use throttle_analysis::analyze::problem::ProblemQuestion;
use throttle_analysis::data::problem::ProblemAxis;
use throttle_analysis::method::demand::Interp;
use throttle_analysis::table::printable;
use throttle_analysis::{Question, TimeUnit};
use throttle_proto::rate::format_bits_per_sec;

use super::{parse_cti, parse_list, Context, Exit};
use crate::measurements::{self, TimeSource};
use crate::output;
use crate::report;
use crate::store::{Store, DEFAULT_DB};

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "Examples:\n  throttle-ctl analyze --predict 4,16\n  throttle-ctl analyze --predict 64 --problem 30   a series with a problem axis: the demand at 64 processes, scale 30\n  throttle-ctl analyze --backtest        would smaller sizes have predicted the larger ones?\n  throttle-ctl analyze --csv measured.csv --cti 5,10 --json\n  throttle-ctl analyze --db results.db --report report/\n  throttle-ctl analyze --export-markdown answer.md --export-csv answer.csv"
)]
pub struct Args {
    /// Results database [default: ./throttle-results.db].
    #[arg(long, conflicts_with = "csv")]
    db: Option<PathBuf>,
    /// Runs measured with any tool: columns workload,nodes,procs,bw_pct,repeat,seconds.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// CTI levels in percent [default: the levels the sweep of the series measured
    /// closely (its `[search]` or `[until]` levels), else 5,10,15,20,25].
    #[arg(long)]
    cti: Option<String>,
    /// Sizes (processes) to project to; measured ones are held out for validation.
    #[arg(long)]
    predict: Option<String>,
    /// The series to analyse when the data holds several.
    #[arg(long)]
    series: Option<String>,
    /// With a series swept over a problem axis (`[problem]` in its spec): the problem
    /// values to project to, with each --predict size [default: the largest measured]. A
    /// BFS's value is its scale, PMM's its matrix order, mw's its bytes per iteration, a
    /// command's the value of its n placeholder (n in curly braces in its run line).
    /// Measured sizes and problems asked are held out of every fit
    /// (`--predict 8 --problem 14`: fitted without 8 nodes and without scale 14).
    #[arg(long, value_name = "VALUES")]
    problem: Option<String>,
    /// With a problem axis: where the link saturates along the weak-scaling line that
    /// starts at this problem value at one process and grows with the processes (its size
    /// x p: mw's volume, or a BFS scale + log2 p).
    #[arg(long, value_name = "VALUE")]
    weak: Option<f64>,
    /// With a problem axis: analyse only this problem value's runs, as a series of one
    /// problem (its report, exports and plots too).
    #[arg(long, value_name = "VALUE", conflicts_with_all = ["problem", "weak"])]
    at_problem: Option<f64>,
    /// With a problem axis: also print each problem value's own answer.
    #[arg(long)]
    verbose: bool,
    /// Print every backtest check (each measured size from the third on, projected from
    /// the smaller ones, against what was measured); the verdict is always printed.
    #[arg(long)]
    backtest: bool,
    /// Keep the runs whose links did not run at their setting (flagged: an agent starved
    /// or stopped, its backlog lost) instead of leaving them out. Said in the output.
    #[arg(long)]
    keep_flagged: bool,
    /// Keep the sizes through whose agents not one byte went in any run, instead of
    /// leaving them out: on one node there is no traffic between nodes, and on more the
    /// program's connections bypassed the agents, so the links' settings cannot have
    /// changed its times. For a program whose time depends on the bandwidth some other way
    /// (a test's stand-in). Said in the output.
    #[arg(long)]
    keep_without_traffic: bool,
    /// Print the analysis as one JSON object on standard output instead of the tables
    /// (warnings stay on standard error).
    #[arg(long)]
    json: bool,
    /// Also write the answer as GitHub-flavoured Markdown tables to FILE (as hyperfine's
    /// --export-markdown): the bottom line, the time per point, the demand per size and
    /// CTI level, the projections with their intervals and verdicts, saturation, backtest
    /// verdicts, warnings. Units in every header (% of the link, CTI %, s).
    #[arg(long, value_name = "FILE")]
    export_markdown: Option<PathBuf>,
    /// Also write the answer's figures as CSV to FILE: one row per measured demand (size,
    /// CTI level) and per projection, numbers as --json holds them (columns:
    /// docs/exports.md).
    #[arg(long, value_name = "FILE")]
    export_csv: Option<PathBuf>,
    /// Write plots (SVG, PNG) and index.html here.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Completion time to analyse: job (launch to exit), kernel (the workload's own
    /// timing), or auto (kernel when every run reported one). With --csv: the columns
    /// wall_seconds, kernel_seconds, or seconds (what `export` chose).
    #[arg(long, default_value = "auto")]
    time: TimeSource,
    /// How demand is read between two measured bandwidth steps: inverse (a straight line
    /// in 1/w: transfer time grows as 1/w) or linear (a straight line in w, the paper's).
    #[arg(long, default_value = "inverse", value_name = "inverse|linear")]
    interpolation: Interp,
}

/// What is analysed: the runs, the link's capacity, which time they are and its unit,
/// and the levels their sweep measured closely.
struct Data {
    obs: Vec<throttle_analysis::Observation>,
    /// Each series' workload (as the store names it), where its runs carry a problem
    /// value: what those values are is the workload's ([`crate::sweep::problem::axis`]).
    workloads: std::collections::BTreeMap<String, String>,
    capacity: Option<f64>,
    time_source: String,
    unit: TimeUnit,
    levels: Option<Vec<f64>>,
}

impl Args {
    /// The stored runs of the series asked (or all): their observations, the links'
    /// capacity, which time they are and its unit, the levels their sweep recorded. The
    /// time is chosen over the series
    /// analysed, not the whole store (a store may hold a rate-measured command beside
    /// timed workloads).
    fn stored(&self) -> anyhow::Result<Data> {
        let db = self.db.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_DB));
        if !db.exists() {
            anyhow::bail!("no results database at {}: run a sweep first (`throttle-ctl sweep SPEC.toml`) or pass --db/--csv", db.display());
        }
        let store = Store::read(&db)?;
        let mut rows = store.rows()?;
        if let Some(s) = &self.series {
            rows.retain(|r| &r.series == s);
        }
        let (obs, chosen) = measurements::observations(&rows, self.time)?;
        // The sweep's levels, when one series is analysed.
        let mut series: Vec<&str> = rows.iter().map(|r| r.series.as_str()).collect();
        series.sort_unstable();
        series.dedup();
        let levels = match series[..] {
            [one] => store.levels(one),
            _ => None,
        };
        let workloads = rows
            .iter()
            .filter(|r| r.problem.is_some())
            .map(|r| (printable(&r.series), r.workload.clone()))
            .collect();
        Ok(Data {
            obs,
            workloads,
            capacity: store.capacity()?,
            time_source: chosen.what.to_string(),
            unit: chosen.unit,
            levels,
        })
    }

    pub fn exec(self, _ctx: &Context) -> Exit {
        // Checked before any file is read.
        let asked = match &self.cti {
            Some(text) => Some(parse_cti(text, "--cti")?),
            None => None,
        };
        let predict = match &self.predict {
            Some(p) => parse_list::<u32>(p, "--predict")?,
            None => Vec::new(),
        };
        if let Some(bad) = predict.iter().find(|p| !(1..=10_000_000).contains(*p)) {
            anyhow::bail!(
                "--predict {bad}: a size to project to is a number of processes from 1 up (e.g. --predict 64,256)"
            );
        }
        // A file that cannot be written fails now, not after the analysis.
        if let Some(f) = &self.export_markdown {
            super::check_output_file("--export-markdown", f)?;
        }
        if let Some(f) = &self.export_csv {
            super::check_output_file("--export-csv", f)?;
        }
        let problems = match &self.problem {
            Some(p) => parse_list::<f64>(p, "--problem")?,
            None => Vec::new(),
        };
        if let Some(bad) = problems
            .iter()
            .chain(&self.weak)
            .chain(&self.at_problem)
            .find(|v| !(v.is_finite() && **v > 0.0 && **v <= 1e15))
        {
            anyhow::bail!("a problem value is a positive number (a BFS scale, a matrix order, bytes, a command's {{n}}), not {bad}");
        }
        let Data {
            mut obs,
            workloads,
            capacity,
            time_source,
            unit,
            levels: swept,
        } = match &self.csv {
            Some(f) => {
                let text = std::fs::read_to_string(f)
                    .map_err(|e| anyhow!("cannot read {}: {e}", f.display()))?;
                // `export` writes the time `analyze --db` uses as `seconds` and the others
                // beside it.
                let column = match self.time {
                    TimeSource::Auto => "seconds",
                    TimeSource::Job => "wall_seconds",
                    TimeSource::Kernel => "kernel_seconds",
                };
                let obs = throttle_analysis::data::csv::parse_with_time(&text, column)
                    .map_err(|e| anyhow!("{}: {e}", f.display()))?;
                let said = throttle_analysis::data::csv::seconds_is(&text)
                    .filter(|_| column == "seconds")
                    .map(|w| format!(" ({w})"))
                    .unwrap_or_default();
                // `export` says when `seconds` holds the inverse of a rate.
                let unit = if said.starts_with(" (1/rate") {
                    TimeUnit::InverseRate
                } else {
                    TimeUnit::Seconds
                };
                // The series of a CSV file begins with its workload.
                let workloads = obs
                    .iter()
                    .filter(|o| o.problem.is_some())
                    .map(|o| {
                        let workload = o.series.split(' ').next().unwrap_or("");
                        (o.series.clone(), workload.to_string())
                    })
                    .collect();
                Data {
                    obs,
                    workloads,
                    capacity: None,
                    time_source: format!("the `{column}` column of {}{said}", f.display()),
                    unit,
                    levels: None,
                }
            }
            None => self.stored()?,
        };
        let levels = match (asked, swept) {
            (Some(l), _) => l,
            (None, Some(l)) => {
                let words: Vec<String> = l.iter().map(f64::to_string).collect();
                crate::note!(
                    "CTI levels {}: the ones its sweep measured closely (--cti to choose others)",
                    words.join(", ")
                );
                l
            }
            (None, None) => parse_cti("5,10,15,20,25", "--cti")?,
        };
        if let Some(v) = self.at_problem {
            let before = obs.len();
            obs.retain(|o| o.problem == Some(v));
            if obs.is_empty() {
                anyhow::bail!(
                    "--at-problem {v}: none of the {before} runs has that problem value{}",
                    if workloads.is_empty() {
                        " (the data has no problem axis)"
                    } else {
                        " (`analyze` without it lists the values)"
                    }
                );
            }
            for o in &mut obs {
                o.problem = None;
            }
        }
        let question = Question {
            cti: levels.clone(),
            predict,
            series: self.series,
            time_source,
            capacity,
            keep_flagged: self.keep_flagged,
            keep_without_traffic: self.keep_without_traffic,
            interp: self.interpolation,
            unit,
        };
        let cap = capacity.map(format_bits_per_sec);
        if throttle_analysis::analyze::problem::has_axis(&obs, &question)? {
            if self.report.is_some() {
                anyhow::bail!("--report draws one problem value at a time: add --at-problem VALUE (the two-parameter answer is in the text, --json, --export-markdown and --export-csv)");
            }
            // The values are those of the series analysed (another may have its own).
            let chosen = throttle_analysis::choose_series(&obs, &question.series)?;
            let axis = workloads
                .get(&chosen)
                .map_or_else(ProblemAxis::default, |w| crate::sweep::problem::axis(w));
            if let Some(bad) = problems
                .iter()
                .chain(&self.weak)
                .find(|v| !axis.size(**v).is_finite())
            {
                anyhow::bail!(
                    "a {} of {bad} is a problem of 2^{bad}: out of range",
                    axis.name
                );
            }
            let asked = ProblemQuestion {
                axis,
                problems,
                weak: self.weak,
            };
            let a = throttle_analysis::analyze::problem::analyze_problem(&obs, &question, &asked)?;
            if self.json {
                output::print_json(&a)?;
            } else {
                output::print(throttle_analysis::render::problem::render(
                    &a,
                    cap.as_deref(),
                    self.verbose,
                ))?;
            }
            if let Some(f) = &self.export_markdown {
                let text = throttle_analysis::render::problem::markdown(&a, cap.as_deref());
                super::write_output_file("--export-markdown", f, &text)?;
            }
            if let Some(f) = &self.export_csv {
                let text = throttle_analysis::render::problem::csv(&a)?;
                super::write_output_file("--export-csv", f, &text)?;
            }
            return Ok(ExitCode::SUCCESS);
        }
        if !problems.is_empty() || self.weak.is_some() {
            anyhow::bail!("--problem and --weak ask of a series swept over a problem axis (`[problem]` in its spec): this one has none (--at-problem analysed one value)");
        }
        let a = throttle_analysis::analyze(&obs, &question)?;
        if self.json {
            output::print_json(&a)?;
        } else {
            let detail = throttle_analysis::render::Detail {
                backtest: self.backtest,
            };
            output::print(throttle_analysis::render::render_with(
                &a,
                &levels,
                cap.as_deref(),
                detail,
            ))?;
        }
        if let Some(f) = &self.export_markdown {
            let text = throttle_analysis::render::document::markdown(&a, cap.as_deref());
            super::write_output_file("--export-markdown", f, &text)?;
        }
        if let Some(f) = &self.export_csv {
            super::write_output_file(
                "--export-csv",
                f,
                &throttle_analysis::render::document::csv(&a)?,
            )?;
        }
        if let Some(dir) = self.report {
            let index = report::write(&dir, &a, &levels, cap.as_deref())?;
            crate::note!("report: {}", index.display());
        }
        Ok(ExitCode::SUCCESS)
    }
}
