//! `throttle-ctl run`: one job (BFS, PMM, a program the agents launch, or a command of the
//! user's such as `mpirun`) on the first N nodes at one bandwidth, printed for people or
//! as JSON.

use std::process::ExitCode;

use anyhow::anyhow;
use clap::{Args as ClapArgs, ValueEnum};
use throttle_proto::workload::{
    BfsOptions, CommandOptions, MwOptions, Options, PmmOptions, ProgramOptions,
};
use throttle_proto::{Lease, Pct, TimeLimit};

use super::{interrupt_flag, Context, Exit};
use crate::job::{self, JobSpec, Outcome};
use crate::link_lease::LinkLease;
use crate::output;
use crate::run_status::RunStatus;
use crate::workload::Workload;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum WorkloadKind {
    /// Graph500-style BFS, 2-D partitioned (throttle-bfs).
    Bfs,
    /// Fox's parallel matrix multiplication (throttle-pmm).
    Pmm,
    /// A master handing each iteration's data to P - 1 workers (throttle-mw).
    Mw,
    /// Any program the agents allow (--program NAME, arguments after --).
    Program,
}

/// Lines of output printed without --verbose.
const SHOWN_LINES: usize = 20;

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "Examples:\n  throttle-ctl run --workload bfs --scale 16 --nodes 4 --ranks-per-node 1 --bw 50\n  throttle-ctl run --workload pmm --size 2048 --bcast pipelined --nodes 4 --bw 30 --json\n  throttle-ctl run --workload mw --volume 16000000 --compute-seconds 2 --nodes 5 --bw 20\n  throttle-ctl run --workload program --program my-app --nodes 2 --bw 100 -- --iterations 10\n  throttle-ctl run --nodes 4 --bw 30 --cmd 'mpirun --mca plm_rsh_agent \"throttle-ctl exec\" --hostfile {hostfile} -np {procs} ./app' --time-regex 'elapsed: ([0-9.]+)'\n\nThe bandwidth of the nodes used is set to --bw for the run and put back as it was\nafterwards (also after a failure or Ctrl-C). Exits with 1 when the job fails.\n\n--cmd runs a command on this host with /bin/sh -c, in its own process group (killed at\nthe time limit), with THROTTLE_CLUSTER set. Placeholders: {nodes}, {procs},\n{ranks_per_node}, {bw} (a number, or `unlimited`) and {hostfile} (written for the chosen\nnodes: `ADDRESS slots=R` per line). Its completion time is its wall time, or the number\n--time-regex captures (the last match in stdout or stderr), or the inverse of the rate\n--rate-regex captures (a TEPS or FLOPS figure: CTI is the same). Any other {word} of lowercase\nletters is refused as a likely typo (write awk's {print} as { print })."
)]
pub struct Args {
    /// What to run: a workload the agents launch on every node (or use --cmd).
    #[arg(
        long,
        value_enum,
        required_unless_present = "cmd",
        conflicts_with = "cmd"
    )]
    workload: Option<WorkloadKind>,
    /// A command to run on this host for the chosen nodes, e.g. an mpirun line (see below).
    #[arg(long, value_name = "TEMPLATE")]
    cmd: Option<String>,
    /// With --cmd: the completion time is what this regex's one group captures (seconds).
    #[arg(long, requires = "cmd", value_name = "REGEX")]
    time_regex: Option<String>,
    /// With --cmd: the program reports a rate; its inverse is stored as the time, so CTI
    /// comes out right, and the analysis prints it as 1/rate. Graph500's reference BFS
    /// prints `bfs  harmonic_mean_TEPS:     !  2.07694e+06`:
    /// --rate-regex 'harmonic_mean_TEPS:[ !]+([0-9.e+-]+)'.
    #[arg(
        long,
        requires = "cmd",
        conflicts_with = "time_regex",
        value_name = "REGEX"
    )]
    rate_regex: Option<String>,
    /// With --cmd: `preload` loads the preload library into everything the command starts
    /// through `throttle-ctl exec` (mpirun's daemons and ranks) and sets
    /// THROTTLE_PRELOAD_LIB for hand-written lines (`mpirun -x LD_PRELOAD=$THROTTLE_PRELOAD_LIB`);
    /// the nodes' agents must serve it (--preload) [default: the cluster's own way].
    #[arg(long, requires = "cmd", value_enum, value_name = "MODE")]
    intercept: Option<crate::intercept::Mode>,
    /// Nodes to use (the first N of the cluster file).
    #[arg(long)]
    nodes: usize,
    #[arg(long, default_value_t = 1)]
    ranks_per_node: usize,
    /// Bandwidth in percent of the capacity (0.01 to 100), or `unlimited`.
    #[arg(long, default_value = "100")]
    bw: Pct,
    /// program: the executable (on the agents' allow-list).
    #[arg(long)]
    program: Option<String>,
    /// Seconds before the job is killed.
    #[arg(long, default_value_t = TimeLimit::DEFAULT)]
    time_limit: TimeLimit,
    /// Seconds the agents keep the job, and the run's bandwidth, without hearing from this
    /// command (it renews while it waits); if throttle-ctl is killed, the job dies and the
    /// bandwidth goes back to what it was this long after.
    #[arg(long, default_value_t = Lease::DEFAULT)]
    lease: Lease,
    /// Print one JSON object instead of the workload's output (its `output` holds every
    /// line kept).
    #[arg(long)]
    json: bool,
    /// Print the whole output kept (a --cmd's output whole up to 1 MiB, then its last
    /// lines), not only its last 20 lines.
    #[arg(long, short)]
    verbose: bool,
    /// Arguments for --workload program.
    #[arg(last = true)]
    args: Vec<String>,
    // The programs' own flags, defined once with their options (throttle_proto::workload).
    #[command(flatten, next_help_heading = "BFS (--workload bfs)")]
    bfs: BfsOptions,
    #[command(flatten, next_help_heading = "PMM (--workload pmm)")]
    pmm: PmmOptions,
    #[command(flatten, next_help_heading = "Master/worker (--workload mw)")]
    mw: MwOptions,
}

impl Args {
    pub fn exec(self, ctx: &Context) -> Exit {
        let options = match self.workload {
            None => Options::Command(CommandOptions {
                run: self.cmd.unwrap_or_default(),
                time_regex: self.time_regex,
                rate_regex: self.rate_regex,
                intercept: self.intercept.map(|m| m.as_str().to_string()),
            }),
            Some(WorkloadKind::Bfs) => Options::Bfs(self.bfs),
            Some(WorkloadKind::Pmm) => Options::Pmm(self.pmm),
            Some(WorkloadKind::Mw) => Options::Mw(self.mw),
            Some(WorkloadKind::Program) => Options::Program(ProgramOptions {
                name: self
                    .program
                    .ok_or_else(|| anyhow!("--workload program needs --program NAME"))?,
                args: self.args,
            }),
        };
        // Refused before the cluster is asked anything.
        let workload = Workload::new(options)?;
        workload.check_procs(self.nodes * self.ranks_per_node)?;
        let cluster = ctx.cluster()?;
        if workload.command().is_some() {
            if let Some(why) = crate::external::unshaped(&cluster, self.nodes) {
                crate::note!("warning: {why}");
            }
        }
        let spec_workload = workload.clone();
        let spec = JobSpec {
            workload,
            nodes: self.nodes,
            ranks_per_node: self.ranks_per_node,
            bw: self.bw,
            latency_us: None,
            time_limit: self.time_limit,
            job_prefix: None,
        };
        // Put back when dropped: after the run, an error, or a panic.
        let links = LinkLease::hold(&cluster, self.lease);
        let cancel = interrupt_flag()?;
        let outcome = job::execute(&cluster, &links, &spec, cancel);
        drop(links);
        let outcome = outcome?;
        if self.json {
            output::print(format!("{}\n", serde_json::to_string(&outcome)?))?;
        } else {
            output::print(outcome_text(&outcome, &spec_workload, self.verbose))?;
        }
        if let Some(flag) = outcome.flag() {
            crate::note!("warning: this run's links did not run at their setting: {flag}");
        }
        Ok(match outcome.status {
            RunStatus::Ok => ExitCode::SUCCESS,
            RunStatus::Interrupted => {
                crate::note!("interrupted: the job was killed on every node");
                ExitCode::from(130)
            }
            RunStatus::Failed => {
                crate::note!(
                    "error: {}",
                    outcome.reason.as_deref().unwrap_or("the job failed")
                );
                ExitCode::from(1)
            }
        })
    }
}

/// The run as people read it: the output's last lines (all with `verbose`), the outcome,
/// what a --time-regex or --rate-regex captured, and whether the links held their
/// setting.
fn outcome_text(outcome: &Outcome, workload: &Workload, verbose: bool) -> String {
    let hidden = if verbose {
        0
    } else {
        outcome.output.len().saturating_sub(SHOWN_LINES)
    };
    let mut text = String::new();
    if hidden > 0 {
        text.push_str(&format!(
            "[{hidden} earlier line(s) of output not shown: --verbose prints them]\n"
        ));
    }
    for l in &outcome.output[hidden..] {
        text.push_str(l);
        text.push('\n');
    }
    text.push_str(&format!(
        "job {}: {} on {} procs ({} nodes x {}), bw {}: {} in {:.3} s\n",
        outcome.job,
        outcome.workload,
        outcome.procs,
        outcome.nodes,
        outcome.ranks_per_node,
        outcome.bw_pct,
        outcome.status,
        outcome.seconds
    ));
    if let Some(re) = workload.command().and_then(|c| c.time_regex.as_ref()) {
        let rate = outcome.result.as_ref().and_then(|r| r.metric("rate"));
        match (re.is_rate(), rate, outcome.kernel_seconds()) {
            (true, Some(r), _) => text.push_str(&format!(
                "its rate {} (--rate-regex; stored as 1/rate)\n",
                throttle_analysis::table::number(r)
            )),
            (false, _, Some(own)) => {
                text.push_str(&format!("its own time {own:.3} s (--time-regex)\n"))
            }
            _ => {}
        }
    }
    match &outcome.fidelity {
        Some(f) if !f.flagged() => text.push_str(&format!(
            "links at their setting: {}\n",
            crate::fidelity::brief(f)
        )),
        Some(_) => {}
        None => {
            text.push_str("links: not known (an agent did not answer before or after the run)\n")
        }
    }
    text
}
