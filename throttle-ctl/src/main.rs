//! `throttle-ctl`: the controller CLI. Parses the command line and dispatches; every
//! command is a module of `throttle_ctl::commands` with its own arguments and `exec`.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use throttle_ctl::cluster::resolve_path;
use throttle_ctl::commands::{self, Context};
use throttle_ctl::output;

/// Throttle the interconnect of a (local or real) cluster and measure what programs need.
///
/// Every node runs a throttle-agent that shapes its traffic to a percentage of an emulated
/// link. throttle-ctl reads the cluster file (default ./throttle-cluster.toml, or --cluster
/// / THROTTLE_CLUSTER), sets bandwidths, runs workloads at stepped bandwidths and cluster
/// sizes, stores every run, and derives how much bandwidth a program needs and how that
/// grows with the cluster.
#[derive(Parser, Debug)]
#[command(
    name = "throttle-ctl",
    version,
    after_help = "Start here:\n  throttle-ctl demo                                  the whole method on a local cluster\n  throttle-ctl local up --nodes 4 --capacity 1Gbit   a local cluster to work with\n  throttle-ctl set 50 && throttle-ctl status\n  throttle-ctl run --workload bfs --nodes 4 --bw 30\n  throttle-ctl local down\n\nYour own program, without root (a loopback cluster; mpirun starts each rank as its node\nthrough `throttle-ctl exec`; `--mca rtc ^hwloc` keeps Open MPI 4.1's daemons from crashing in\ntheir hwloc setup when they share one machine; `throttle-ctl calibrate` suggests a capacity\nthis machine holds):\n  throttle-ctl local up --nodes 4 --capacity 100Mbit\n  throttle-ctl run --nodes 4 --bw 30 --cmd 'mpirun --mca plm_rsh_agent \"throttle-ctl exec\" --mca btl tcp,self --mca rtc ^hwloc --hostfile {hostfile} -np {procs} ./app'\n\nAs root (namespace hosts: every TCP connection between nodes shaped by the kernel):\n  throttle-ctl local up --netns --nodes 4\n  throttle-ctl run --nodes 4 --bw 30 --cmd 'mpirun --allow-run-as-root --mca plm_rsh_agent \"throttle-ctl exec\" --mca btl tcp,self --mca rtc ^hwloc --hostfile {hostfile} -np {procs} ./app'"
)]
struct Cli {
    /// Cluster file [default: ./throttle-cluster.toml, or $THROTTLE_CLUSTER].
    #[arg(long, global = true)]
    cluster: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start or stop a local emulated cluster (loopback addresses, or namespace hosts).
    Local(commands::local::Args),
    /// Write the cluster file of a real cluster from a host list, a hostfile or Slurm.
    Cluster(commands::cluster::Args),
    /// Start, check or stop the agents on the cluster file's hosts over ssh.
    Deploy(commands::deploy::Args),
    /// Run a command as a node of a local cluster: inside its namespace, or on loopback as that node (like ssh; an mpirun launch agent).
    Exec(commands::exec::Args),
    /// Show every node's bandwidth setting, current rates and open streams.
    Status(commands::status::Args),
    /// Throttle the link of every node (or one) to PCT % of its capacity.
    Set(commands::set::Args),
    /// Shaped port forwards that carry any TCP program (iperf3, a database client) between nodes.
    Forward(commands::forward::Args),
    /// Run one job (BFS, PMM, a program of yours, or a command such as mpirun) on N nodes at one bandwidth.
    Run(commands::run::Args),
    /// Run a sweep (bandwidth steps x node counts x repeats) and store every run; resumable.
    Sweep(commands::sweep::Args),
    /// Derive CTI curves, bandwidth demand, the demand constant and projections.
    Analyze(commands::analyze::Args),
    /// The whole method end to end on a local emulated cluster (about 2 minutes 15 s on 2 cores).
    Demo(commands::demo::Args),
    /// Write every stored run as CSV.
    Export(commands::export::Args),
    /// Print the output a stored run kept (a --cmd's whole output), by its job name.
    Output(commands::output::Args),
    /// Measure what each link really carries at 100%, and what this host can carry at all.
    Calibrate(commands::calibrate::Args),
    /// The other seed papers' models against the emulator: Fox PMM, master/worker, LogGPS.
    Model(commands::model::Args),
    /// Print shell completions for throttle-ctl.
    Completions(commands::completions::CompletionsArgs),
    /// Write man pages for throttle-ctl and its commands.
    Man(commands::completions::ManArgs),
    /// (Internal) the guard of a `run --cmd`: kills the command's processes when the
    /// controller is gone (external::guard).
    #[command(name = "__guard", hide = true)]
    Guard,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ctx = Context {
        cluster_path: resolve_path(cli.cluster),
    };
    let result = match cli.command {
        Command::Local(a) => a.exec(&ctx),
        Command::Cluster(a) => a.exec(&ctx),
        Command::Deploy(a) => a.exec(&ctx),
        Command::Exec(a) => a.exec(&ctx),
        Command::Status(a) => a.exec(&ctx),
        Command::Set(a) => a.exec(&ctx),
        Command::Forward(a) => a.exec(&ctx),
        Command::Run(a) => a.exec(&ctx),
        Command::Sweep(a) => a.exec(&ctx),
        Command::Analyze(a) => a.exec(&ctx),
        Command::Demo(a) => a.exec(&ctx),
        Command::Export(a) => a.exec(&ctx),
        Command::Output(a) => a.exec(&ctx),
        Command::Calibrate(a) => a.exec(&ctx),
        Command::Model(a) => a.exec(&ctx),
        Command::Completions(a) => a.exec::<Cli>(&ctx),
        Command::Man(a) => a.exec::<Cli>(&ctx),
        Command::Guard => {
            throttle_ctl::external::guard::watch(std::io::stdin().lock());
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        // `throttle-ctl export | head`: the reader is gone, which is not an error.
        Err(e) if output::is_closed_output(&e) => ExitCode::SUCCESS,
        Err(e) => {
            throttle_ctl::note!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
