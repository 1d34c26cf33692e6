//! `throttle-ctl sweep SPEC.toml`: node counts x bandwidth steps x repeats, every run
//! stored; resumable.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args as ClapArgs;
use serde_json::json;
use throttle_proto::Lease;

use super::{interrupt_flag, Context, Exit};
use crate::output;
use crate::progress::SweepProgress;
use crate::store::{Store, DEFAULT_DB};
use crate::sweep::{self, Sweep, SweepEnd, SweepOptions};

#[derive(ClapArgs, Debug)]
#[command(
    after_help = concat!(
        "Re-running the same command skips the points already stored (and first removes jobs an\nearlier, killed run of it left on the agents); Ctrl-C stops after killing the running\njob. A node that cannot be reached fails its points with a reason naming it, and the\nsweep goes on (--fail-fast stops). The bandwidth of the nodes is put back as it was when\nthe sweep ends, however it ends. Each run's output is stored with it (a command's whole\noutput): `throttle-ctl output JOB` prints it; a failed run's line names its job.\n\nExit status: 0 complete, 1 points given up (or --fail-fast stopped), 130 interrupted,\n141 stopped because its output was closed (`| head`: the bandwidth is put back, what\nran is stored).\n\n",
        crate::sweep_keys_help!()
    )
)]
pub struct Args {
    /// The sweep specification (TOML).
    spec: PathBuf,
    /// Results database [default: ./throttle-results.db].
    #[arg(long)]
    db: Option<PathBuf>,
    /// Stop at the first run that cannot start because a node is unreachable or
    /// refuses it, instead of storing the failure and going on.
    #[arg(long)]
    fail_fast: bool,
    /// Go on when a node count's warm-up run fails (by default the sweep stops there and
    /// prints the program's own error lines: every run after it would fail alike).
    #[arg(long)]
    ignore_failure: bool,
    /// Run again the points an earlier invocation gave up (they failed or were flagged
    /// more often than `retries` allows), each with its retries anew: after their cause
    /// is fixed (the program, a capacity this machine can carry, fewer nodes).
    #[arg(long)]
    retry_given_up: bool,
    /// Seconds the agents keep a job alive, and a run's bandwidth, without hearing from
    /// this sweep (if throttle-ctl is killed, both end this long after).
    #[arg(long, default_value_t = Lease::DEFAULT)]
    lease: Lease,
    /// Print progress as one line per run even on a terminal.
    #[arg(long)]
    plain: bool,
    /// Print a JSON summary on standard output at the end (progress stays on stderr).
    #[arg(long)]
    json: bool,
    /// Run a sweep whose `bandwidths` have no 100% step: no CTI (and so no demand or
    /// projection) can be derived from it alone; enough for `throttle-ctl model`, which
    /// fits the analytic models on the stepped runs.
    #[arg(long)]
    no_baseline: bool,
}

impl Args {
    pub fn exec(self, ctx: &Context) -> Exit {
        let mut sweeps = Sweep::load(&self.spec)?;
        let first = &sweeps[0];
        if !first.steps.contains(&throttle_proto::Pct::FULL) && !self.no_baseline {
            anyhow::bail!(
                "{}: `bandwidths` has no 100% step, and a CTI is a time against the unshaped run: `analyze` could derive no demand from this sweep. Add 100 to `bandwidths`, or pass --no-baseline if these runs are for `throttle-ctl model` (which fits on the stepped runs)",
                self.spec.display()
            );
        }
        let cluster = ctx.cluster()?;
        // Checked before the database is created or a node touched.
        for sweep in &sweeps {
            sweep.check_cluster(&cluster)?;
        }
        let max_nodes = sweeps
            .iter()
            .flat_map(|s| s.spec.nodes.iter().copied())
            .max()
            .unwrap_or(0);
        if first.workload.command().is_some() {
            if let Some(why) = crate::external::unshaped(&cluster, max_nodes) {
                crate::note!("warning: {why}");
            }
        }
        let db = self.db.unwrap_or_else(|| PathBuf::from(DEFAULT_DB));
        let store = Store::open(&db)?;
        for sweep in &mut sweeps {
            sweep.resume_as_stored(&store)?;
        }
        let series = sweeps[0].series.clone();
        same_capacity(&store, &series, &cluster, &db)?;
        let options = SweepOptions {
            job_prefix: sweep::job_prefix(&db, &series),
            lease: self.lease,
            fail_fast: self.fail_fast,
            ignore_failure: self.ignore_failure,
            retry_given_up: self.retry_given_up,
        };
        let cancel = interrupt_flag()?;
        if let Some(w) = crate::load::oversubscription(
            &cluster,
            max_nodes,
            sweeps[0].spec.ranks_per_node,
            sweeps[0].workload.emulates_compute(),
        ) {
            crate::note!("warning: {w}");
        }
        let mut progress = SweepProgress::new(self.plain).stop_on_closed_output(cancel);
        // One sweep per problem value, one after the other; what each ran adds up.
        let count = sweeps.len();
        let mut total = SweepEnd::Complete {
            runs: Default::default(),
            already_stored: 0,
            gave_up: 0,
            until: None,
        };
        for (i, sweep) in sweeps.iter().enumerate() {
            let of = match sweep.problem {
                Some(n) => format!(" (problem value {n}, {} of {count})", i + 1),
                None => String::new(),
            };
            crate::note!("{}{of}", plan_text(sweep, &db));
            let end = sweep.execute(&cluster, &store, &options, cancel, |e| progress.event(e));
            let end = match end {
                Ok(end) => end,
                Err(e) => {
                    progress.finish();
                    return Err(e);
                }
            };
            total = total.and_then(end);
            if matches!(total, SweepEnd::Interrupted { .. }) {
                break;
            }
        }
        progress.finish();
        let end = total;
        if self.json && !progress.output_closed() {
            let problems: Vec<u64> = sweeps.iter().filter_map(|s| s.problem).collect();
            output::print_json(
                &json!({ "db": db, "series": series, "problems": problems, "result": end }),
            )?;
        }
        Ok(match end {
            SweepEnd::Complete {
                runs,
                already_stored,
                gave_up,
                until,
            } => {
                if !self.json {
                    let precision = until.map_or(String::new(), |u| {
                        format!(
                            "; [until] {} ({} of {} runs): {}",
                            if u.reached { "reached" } else { "NOT reached" },
                            u.spent,
                            u.budget,
                            u.why
                        )
                    });
                    let done = if gave_up > 0 {
                        "sweep ended"
                    } else {
                        "sweep complete"
                    };
                    output::print(format!("{done}: {}, {already_stored} already stored, {gave_up} points given up{precision}; analyze with `throttle-ctl analyze --db {}`\n", runs_text(&runs, " now"), db.display()))?;
                }
                if gave_up > 0 {
                    crate::note!("{gave_up} point(s) given up: the reasons are above (and `throttle-ctl output JOB` prints a run's whole output); once the cause is fixed, the same command with --retry-given-up runs them again");
                }
                if gave_up > 0 {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                }
            }
            SweepEnd::Interrupted { runs } if progress.output_closed() => {
                let ran = runs_text(&runs, "");
                // Said on standard error, where that is still read (`| head` closed the
                // other one); the status a tool killed by SIGPIPE has.
                crate::note!("stopped: the output was closed after {ran}; the bandwidth is back, everything stored is kept in {}. Run the same command to resume.", db.display());
                ExitCode::from(141)
            }
            SweepEnd::Interrupted { runs } => {
                let ran = runs_text(&runs, "");
                crate::note!("interrupted after {ran}; everything stored is kept in {}. Run the same command to resume.", db.display());
                ExitCode::from(130)
            }
        })
    }
}

/// The runs an invocation made, and those of them that do not count: "10 runs{now} (2
/// flagged, 1 failed: stored, and their points run again or given up)".
fn runs_text(r: &sweep::Ran, now: &str) -> String {
    let bad: Vec<String> = [(r.flagged, "flagged"), (r.failed, "failed")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if bad.is_empty() {
        format!("{} runs{now}", r.ran)
    } else {
        format!(
            "{} runs{now} ({}: stored, and their points run again or given up)",
            r.ran,
            bad.join(", ")
        )
    }
}

/// The line that says what the sweep will run: points, node counts, steps, repeats, the
/// demand search, and where the results go.
fn plan_text(sweep: &Sweep, db: &Path) -> String {
    format!(
        "sweep {}: {} points ({} node counts x {} bandwidths x {} repeats{}), results in {}",
        sweep.series,
        sweep.points.len(),
        sweep.spec.nodes.len(),
        sweep.steps.len(),
        match sweep.spec.repeats {
            sweep::Repeats::Fixed(n) => n.to_string(),
            sweep::Repeats::Auto => format!(
                "{} (auto: more where the median is not within {}%, up to {})",
                sweep::AUTO_FIRST,
                sweep.spec.precision * 100.0,
                sweep.spec.max_repeats
            ),
        },
        match &sweep.spec.search {
            Some(s) => format!(
                "; the 100% baseline twice as many; then a demand search for CTI {} until each lies between steps at most {} points apart, at most {} more steps per node count",
                s.levels.iter().map(|l| format!("{l}%")).collect::<Vec<_>>().join(", "),
                s.width,
                s.max_steps
            ),
            None => String::new(),
        },
        db.display()
    )
}

/// A store that holds this sweep's runs at another link capacity is refused: a
/// percentage of one link is not one of the other, and the points stored at the first
/// would be skipped as done.
fn same_capacity(
    store: &Store,
    series: &str,
    cluster: &crate::cluster::Cluster,
    db: &std::path::Path,
) -> anyhow::Result<()> {
    // The capacity the agents run at (a run stores what they report; `set --capacity`
    // may have changed it since the cluster file was written).
    let cap = cluster
        .file
        .nodes
        .first()
        .and_then(|n| {
            crate::cluster::agent_client::AgentClient::new(cluster, n)
                .status()
                .ok()
        })
        .map_or(cluster.file.capacity, |s| s.capacity);
    let now = cap;
    let cap = cap.bytes_per_sec();
    let other: Vec<String> = store
        .capacities(series)?
        .into_iter()
        .filter(|c| (c / cap - 1.0).abs() > 1e-6)
        .map(throttle_proto::rate::format_bits_per_sec)
        .collect();
    if !other.is_empty() {
        anyhow::bail!(
            "{} holds this sweep's runs on links of {}, and this cluster's links are {}: a percentage of one is not of the other. Give this capacity a results database of its own (--db), or sweep on a cluster at {}",
            db.display(),
            other.join(", "),
            now,
            other.join(" or ")
        );
    }
    Ok(())
}
